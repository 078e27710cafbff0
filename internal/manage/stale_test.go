package manage_test

import (
	"errors"
	"testing"

	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/manage"
)

func TestStaleErrorMessage(t *testing.T) {
	b := &buckets.Bucket{Name: "b"}
	b.Version = 3
	o := &buckets.Override{ID: 7, Bucket: "b"}
	o.Version = 5
	tests := []struct {
		err  error
		want string
	}{
		{&manage.StaleError[*buckets.Bucket]{Current: b, Based: 2},
			`bucket "b" was changed by someone else (now version 3, you edited version 2); reload it and apply your change again`},
		{&manage.StaleError[*buckets.Override]{Current: o, Based: 4},
			`override 7 of bucket "b" was changed by someone else (now version 5, you edited version 4); reload it and apply your change again`},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
		if msg, ok := errs.PublicMessage(tt.err); !ok || msg != tt.want {
			t.Errorf("PublicMessage = %q, %v", msg, ok)
		}
		if !errors.Is(tt.err, errs.ErrConflict) {
			t.Errorf("%v does not match errs.ErrConflict", tt.err)
		}
	}
}
