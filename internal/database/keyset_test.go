package database_test

import (
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/internal/database"
)

func TestKeyset(t *testing.T) {
	for _, tc := range []struct {
		rows               []int
		backward, fromCurs bool
		want               string
	}{
		{[]int{1, 2, 3}, false, false, "[1 2] next 2 prev -"}, // first page, more follow
		{[]int{1, 2}, false, false, "[1 2] next - prev -"},    // the only page
		{[]int{3, 4, 5}, false, true, "[3 4] next 4 prev 3"},  // a middle page, forward
		{[]int{5}, false, true, "[5] next - prev 5"},          // the last page, forward
		{[]int{4, 3, 2}, true, false, "[3 4] next 4 prev 3"},  // a middle page, backward
		{[]int{2, 1}, true, false, "[1 2] next 2 prev -"},     // back to the first page
		{[]int{}, true, false, "[] next - prev -"},            // nothing before
		{[]int{}, false, true, "[] next - prev -"},            // nothing after
	} {
		page, next, prev := database.Keyset(append([]int(nil), tc.rows...), 2, tc.backward, tc.fromCurs)
		at := func(i int) string {
			if i < 0 {
				return "-"
			}
			return fmt.Sprint(page[i])
		}
		if got := fmt.Sprintf("%v next %s prev %s", page, at(next), at(prev)); got != tc.want {
			t.Errorf("Keyset(%v, backward %v, from cursor %v) = %s, want %s", tc.rows, tc.backward, tc.fromCurs, got, tc.want)
		}
	}
}
