package usage_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/client/usage"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/redisscript/testenv"
)

// Would-denies of a bucket in shadow mode count as allowed and, apart, in
// "<app>:w", in the minute and the hour hashes.
func TestWouldDenyCounted(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	ks := redisscript.Keyspace{Prefix: prefix}
	ctx := context.Background()
	cfg := redisscript.Config{Name: "trial", ID: 1, Version: 1, Capacity: 2, PermitsMicro: 1, PeriodSeconds: 3600,
		Apps: []string{"web"}, Shadow: true}
	if out, err := redisscript.Apply(ctx, rdb, ks, cfg, false); err != nil || out != redisscript.Created {
		t.Fatalf("apply: %v %v", out, err)
	}
	rec, err := usage.NewRecorder(rdb, "web", usage.WithKeyPrefix(prefix), usage.WithFlushInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	lim, err := client.New(rdb, "web", client.WithKeyPrefix(prefix), client.WithObserver(rec.Observe),
		client.WithFailurePolicy(client.FailClosed), client.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	would := 0
	for range 5 {
		res, err := lim.Acquire(ctx, "trial", 1)
		if err != nil || !res.Allowed {
			t.Fatalf("%+v %v", res, err)
		}
		if res.WouldDeny {
			would++
		}
	}
	if would != 3 {
		t.Fatalf("%d would-denies of 5 on a bucket of 2, want 3", would)
	}
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{redisscript.UsageAllowedField("web"): 5, redisscript.UsageWouldDenyField("web"): 3}
	for _, kind := range []string{"m", "h"} {
		got := sums(t, rdb, fmt.Sprintf("%s{trial}:usage:%s:*", prefix, kind))
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s hashes: got %v, want %v", kind, got, want)
		}
	}
}
