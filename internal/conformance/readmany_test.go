package conformance_test

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/redisscript/testenv"
)

// TestReadMany checks that one pipelined read of a page answers what Read
// answers for each bucket: config, tokens taken, a bucket not written yet,
// and a name that cannot exist.
func TestReadMany(t *testing.T) {
	ctx := context.Background()
	rdb, prefix := testenv.Redis(t)
	ks := redisscript.Keyspace{Prefix: prefix}
	for i, name := range []string{"a", "b"} {
		cfg := redisscript.Config{Name: name, ID: int64(i + 1), Version: 3, Capacity: 10,
			PermitsMicro: 1_000_000, PeriodSeconds: 3600, Apps: []string{"shop"}}
		if _, err := redisscript.Apply(ctx, rdb, ks, cfg, false); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := redisscript.Acquire(ctx, rdb, ks, "a", "shop", 4); err != nil {
		t.Fatal(err)
	}
	got, err := redisscript.ReadMany(ctx, rdb, ks, []string{"a", "b", "missing", "Bad Name"})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b", "missing"} {
		want, err := redisscript.Read(ctx, rdb, ks, name)
		if err != nil {
			t.Fatal(err)
		}
		g := got[name]
		// One token an hour: the two reads, moments apart, agree to a token.
		if g.Exists != want.Exists || g.Config.Version != want.Config.Version || g.Config.Capacity != want.Config.Capacity ||
			int64(g.Tokens) != int64(want.Tokens) || g.Stored != want.Stored {
			t.Errorf("%s: ReadMany %+v, Read %+v", name, g, want)
		}
	}
	if got["a"].Tokens < 6 || got["a"].Tokens >= 7 {
		t.Errorf("a: %v tokens after taking 4 of 10", got["a"].Tokens)
	}
	if got["Bad Name"].Exists {
		t.Error("an invalid name exists")
	}
	if _, err := redisscript.ReadMany(ctx, rdb, ks, make([]string, redisscript.MaxReadMany+1)); err == nil {
		t.Error("more than a page of names was read")
	}
}
