package buckets

import (
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/errs"
)

func TestSlotLeaseTime(t *testing.T) {
	conc := func(ms int64) Bucket {
		return Bucket{Name: "exports", OwnerApp: "shop", Kind: KindConcurrency, MaxPermits: 20, SlotMillis: ms}
	}
	for _, c := range []struct {
		name string
		b    Bucket
		bad  bool
		want int64
	}{
		{"default", conc(0), false, DefaultSlotMillis},
		{"10 ms", conc(10), false, 10},
		{"a day", conc(86_400_000), false, 86_400_000},
		{"9 ms", conc(9), true, 9},
		{"over a day", conc(86_400_001), true, 86_400_001},
		{"negative", conc(-1), true, -1},
		{"a token bucket's", func() Bucket { b := validBucket(); b.SlotMillis = 1000; return b }(), true, 1000},
		{"a token bucket without", validBucket(), false, 0},
	} {
		b := c.b
		err := b.Validate()
		if got := errs.Fields(err).For("slot_ms") != ""; got != c.bad {
			t.Errorf("%s: %v, want invalid slot_ms: %v", c.name, err, c.bad)
		}
		if b.SlotMillis != c.want {
			t.Errorf("%s: slot_ms %d after Validate, want %d", c.name, b.SlotMillis, c.want)
		}
	}
	a, b := conc(1000), conc(1000)
	if err := errsOf(a.Validate(), b.Validate()); err != nil {
		t.Fatal(err)
	}
	b.SlotMillis = 2000
	if a.SameSettings(&b) {
		t.Error("a changed slot lease time is no change")
	}
}

func errsOf(e ...error) error {
	for _, err := range e {
		if err != nil {
			return err
		}
	}
	return nil
}

func TestSimulateSlots(t *testing.T) {
	// 10 calls a second, each lasting 2 s, against 5 slots: the calls of
	// 0 to 0.4 s take the slots, which come back from 2 s on, when the
	// calls of 2.0 to 2.4 s take them again.
	p := Pattern{Steady: 10, Duration: 4 * time.Second}
	sim, err := SimulateSlots(5, 2*time.Second, p)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{5, 0, 5, 0}; !slices.Equal(sim.Allowed, want) {
		t.Errorf("allowed per second %v, want %v (5 slots held 2 s each)", sim.Allowed, want)
	}
	if sim.TotalAllowed+sim.TotalDenied != 40 || sim.TotalAllowed != 10 {
		t.Errorf("totals %d allowed, %d denied", sim.TotalAllowed, sim.TotalDenied)
	}
	// A burst of 100 every 10 s against 20 slots held 1 s: 20 of each burst.
	sim, err = SimulateSlots(20, time.Second, Pattern{Burst: 100, Every: 10 * time.Second, Duration: 30 * time.Second})
	if err != nil || sim.TotalAllowed != 60 || sim.TotalDenied != 240 {
		t.Errorf("bursts: %d allowed, %d denied, %v", sim.TotalAllowed, sim.TotalDenied, err)
	}
	// A huge limit and huge bursts cost one entry per arrival.
	sim, err = SimulateSlots(MaxCapacity, time.Hour, Pattern{Burst: MaxBurst, Every: time.Second, Duration: MaxSimulated})
	if err != nil || sim.TotalAllowed != 600*MaxBurst {
		t.Errorf("huge: %d allowed, %v", sim.TotalAllowed, err)
	}
	if _, err := SimulateSlots(0, 0, p); errs.Fields(err).For("max_permits") == "" || errs.Fields(err).For("hold") == "" {
		t.Errorf("invalid limit and hold: %v", err)
	}
}
