package syncer

import (
	"context"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/redisscript"
)

// codeAfterDrain takes key's one token and answers the code of the next
// acquire: Denied when enforced, WouldDeny in shadow mode.
func (e *env) codeAfterDrain(t *testing.T, bucket, key string) redisscript.Code {
	t.Helper()
	ctx := context.Background()
	var a redisscript.KeyedAnswer
	for range 2 {
		var err error
		if a, err = redisscript.AcquireKey(ctx, e.rdb, e.ks, bucket, key, ownerApp, 1); err != nil {
			t.Fatal(err)
		}
	}
	return a.Code
}

// Shadow mode of keyed buckets and overrides travels from MySQL to Redis
// through the change events and the reconcile, like every other setting.
func TestKeyedShadowSyncs(t *testing.T) {
	e := newEnv(t, nil)
	w := e.worker(Config{})
	ctx := context.Background()
	b := e.createKeyed(t, "api", 1, "1/h")
	o := e.createOverride(t, "api", buckets.MatchPrefix, "trial:", 1)
	o.Shadow = true
	if err := e.store.UpdateOverride(ctx, actor, o); err != nil {
		t.Fatal(err)
	}
	syncOnce(t, w)
	if got := e.codeAfterDrain(t, "api", "trial:1"); got != redisscript.WouldDeny {
		t.Fatalf("key of a shadow override: code %d, want would deny", got)
	}
	if got := e.codeAfterDrain(t, "api", "paid:1"); got != redisscript.Denied {
		t.Fatalf("other key: code %d, want denied", got)
	}

	b.Shadow = true
	if err := e.store.Update(ctx, actor, b); err != nil {
		t.Fatal(err)
	}
	syncOnce(t, w)
	if got := e.codeAfterDrain(t, "api", "paid:2"); got != redisscript.WouldDeny {
		t.Fatalf("key of a shadow bucket: code %d, want would deny", got)
	}

	// The reconcile repairs a flag lost in Redis.
	k := e.ks.Keyed("api", "trial:1")
	if err := e.rdb.HSet(ctx, k.Config, redisscript.FieldShadow, "0").Err(); err != nil {
		t.Fatal(err)
	}
	v, err := e.rdb.HGet(ctx, e.ks.KeyGroup("api", 0), "p:trial:").Result()
	if err != nil || !strings.HasSuffix(v, " s") {
		t.Fatalf("stored override %q %v, want a shadow one", v, err)
	}
	if err := e.rdb.HSet(ctx, e.ks.KeyGroup("api", 0), "p:trial:", strings.TrimSuffix(v, " s")).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if d := e.keyedDiff(t, "api"); len(d) > 0 {
		t.Fatalf("after reconcile: %v", d)
	}
	st, err := redisscript.ReadGroup(ctx, e.rdb, e.ks, "api", 0)
	if err != nil {
		t.Fatal(err)
	}
	so, ok := redisscript.ParseStoredOverride(st.Prefixes["trial:"])
	if !ok || !so.Shadow || !st.Config.Shadow {
		t.Fatalf("group 0 after reconcile: config shadow %v, override %+v", st.Config.Shadow, so)
	}
}
