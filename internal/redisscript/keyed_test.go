package redisscript_test

import (
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/internal/redisscript"
)

// The example of docs/protocol.md.
func TestKeyHashExample(t *testing.T) {
	state, g := redisscript.KeyHash("user-1")
	if state != "9dfffe450852c20c" || g != 54 {
		t.Fatalf("KeyHash(user-1) = %s, %d", state, g)
	}
	k := redisscript.Keyspace{}.Keyed("api", "user-1")
	if k.Config != "sluice:k{api:54}" || k.State != "sluice:k{api:54}9dfffe450852c20c" {
		t.Fatalf("keys = %+v", k)
	}
}

func TestKeyGroupsSpread(t *testing.T) {
	seen := make([]int, redisscript.KeyGroups)
	for i := range 10_000 {
		_, g := redisscript.KeyHash(fmt.Sprintf("user-%d", i))
		seen[g]++
	}
	for g, n := range seen {
		// 156 expected per group.
		if n < 100 || n > 220 {
			t.Errorf("group %d got %d of 10000 keys", g, n)
		}
	}
}
