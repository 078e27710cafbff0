package devstack_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client/usage"
	"github.com/sluicehq/sluice/internal/devstack"
	readusage "github.com/sluicehq/sluice/internal/usage"
)

// The usage roll-up's SQL runs on the embedded engine too.
func TestStackRollsUpUsage(t *testing.T) {
	ctx := context.Background()
	st, err := devstack.Start(ctx, devstack.Options{AdminPassword: "correct horse battery"})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })

	rec, err := usage.NewRecorder(st.Redis, devstack.DemoApp, usage.WithFlushInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	// Three minutes ago: rolled up at once, whatever the grace.
	rec.Add(devstack.DemoBucket, time.Now().Add(-3*time.Minute), false, 4)
	rec.Add(devstack.DemoBucket, time.Now().Add(-3*time.Minute), true, 6)
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Roller.RollUp(ctx); err != nil {
		t.Fatalf("roll-up on the embedded engine: %v", err)
	}
	rs := readusage.NewRecents(st.DB)
	got, err := rs.For(ctx, []string{devstack.DemoBucket})
	if err != nil {
		t.Fatal(err)
	}
	if r := got[devstack.DemoBucket]; r.TotalDenied != 4 || r.TotalAllowed != 6 {
		t.Errorf("rolled up %+v, want 6 allowed and 4 denied", r)
	}
	top, err := rs.TopDenied(ctx, nil, 5)
	if err != nil || len(top) != 1 || top[0].Bucket != devstack.DemoBucket {
		t.Errorf("top denied = %+v, %v", top, err)
	}
}
