package buckets_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/errs"
)

// TestReserveValidation: a reserve is a whole number of permits below the
// capacity, so that requests not marked critical can always take some.
func TestReserveValidation(t *testing.T) {
	for _, tc := range []struct {
		reserve, capacity int64
		ok                bool
	}{{0, 10, true}, {9, 10, true}, {10, 10, false}, {11, 10, false}, {-1, 10, false}, {1, 1, false},
		{buckets.MaxCapacity - 1, buckets.MaxCapacity, true}} {
		b := &buckets.Bucket{Name: "b", OwnerApp: "shop", MaxPermits: tc.capacity, Rate: rate(t, "1/s"),
			Reserve: tc.reserve}
		err := b.Validate()
		if got := errs.Fields(err).For("reserve"); (got == "") != tc.ok {
			t.Errorf("reserve %d of %d: %v", tc.reserve, tc.capacity, err)
		}
	}
	// A capacity lowered below the reserve is refused on the reserve.
	b := &buckets.Bucket{Name: "b", OwnerApp: "shop", MaxPermits: 5, Rate: rate(t, "1/s"), Reserve: 5}
	if msg := errs.Fields(b.Validate()).For("reserve"); !strings.Contains(msg, "less than max_permits (5)") {
		t.Errorf("reserve at the capacity: %q", msg)
	}
}

func TestParseReserve(t *testing.T) {
	for in, want := range map[string]int64{"": 0, "0": 0, "4": 4, "1,000": 1000, " 12 ": 12} {
		if got, err := buckets.ParseReserve(in); err != nil || got != want {
			t.Errorf("ParseReserve(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"-1", "1.5", "many", "1e3", "99999999999"} {
		if _, err := buckets.ParseReserve(bad); errs.Fields(err).For("reserve") == "" {
			t.Errorf("ParseReserve(%q): %v, want a problem on reserve", bad, err)
		}
	}
}

func TestReserveSummary(t *testing.T) {
	if got, want := buckets.ReserveSummary(10, 4), "keeps 4 of its 10 tokens for critical requests: the others get at most 6 at once, "+
		"and are refused while fewer than 4 would be left"; got != want {
		t.Errorf("summary: %q, want %q", got, want)
	}
	for _, c := range [][2]int64{{10, 0}, {10, 10}, {0, 1}} {
		if got := buckets.ReserveSummary(c[0], c[1]); got != "" {
			t.Errorf("ReserveSummary(%d, %d) = %q, want none", c[0], c[1], got)
		}
	}
	b := &buckets.Bucket{MaxPermits: 10, Reserve: 3}
	if got := []int64{b.ReserveOf(100), b.ReserveOf(7), b.ReserveOf(3), b.ReserveOf(10)}; !slices.Equal(got, []int64{30, 2, 0, 3}) {
		t.Errorf("override reserves: %v, want [30 2 0 3]", got)
	}
}

// TestSimulateReserve: the preview's requests are not critical, so they
// leave the reserve.
func TestSimulateReserve(t *testing.T) {
	r := rate(t, "1/s")
	sim, err := buckets.Simulate(20, 5, r, buckets.Pattern{Burst: 25, Every: 10 * time.Second, Duration: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// 15 of the 20 at first; then 10 refilled of which all may go, the
	// reserve staying full.
	if sim.Allowed[0] != 15 || sim.Allowed[10] != 10 || sim.Allowed[20] != 10 || sim.TotalAllowed != 35 {
		t.Errorf("bursts with a reserve of 5: %v / %v", sim.Allowed, sim.Denied)
	}
	if _, err := buckets.Simulate(20, 20, r, buckets.Pattern{Steady: 1, Duration: time.Minute}); errs.Fields(err).For("reserve") == "" {
		t.Errorf("a reserve of the whole capacity: %v", err)
	}
}

// TestReserveIsStored: the reserve is saved, read back and changed by an
// update; the sync worker reads it with the rest of the definition.
func TestReserveIsStored(t *testing.T) {
	_, s := setup(t)
	b := newBucket(t, "kept")
	b.Reserve = 3
	create(t, s, b)
	got, err := s.Get(ctx, "kept")
	if err != nil || got.Reserve != 3 {
		t.Fatalf("get after create: %+v %v", got, err)
	}
	same := *got
	if !got.SameSettings(&same) {
		t.Fatal("a bucket has the settings of its copy")
	}
	got.Reserve = 0
	if got.SameSettings(&same) {
		t.Fatal("another reserve is another setting")
	}
	if err := s.Update(ctx, alice, got); err != nil {
		t.Fatal(err)
	}
	if again, err := s.Get(ctx, "kept"); err != nil || again.Reserve != 0 || again.Version != 2 {
		t.Fatalf("get after update: %+v %v", again, err)
	}
	bad := newBucket(t, "too-much")
	bad.Reserve = bad.MaxPermits
	if err := s.Create(ctx, alice, bad); errs.Fields(err).For("reserve") == "" {
		t.Fatalf("create with a reserve of the whole capacity: %v", err)
	}
}
