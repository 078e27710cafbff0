package slots

import (
	"strconv"
	"testing"
)

func TestTakeReleaseRenew(t *testing.T) {
	var s Set
	const lease = 1_000_000 // 1 s
	steps := []struct {
		op   Op
		id   string
		now  int64
		want Answer
	}{
		{Take, "a", 0, Answer{Code: Allowed, InUse: 1}},
		{Take, "b", 100, Answer{Code: Allowed, InUse: 2}},
		{Take, "c", 200, Answer{Code: Denied, InUse: 2, RetryMicros: 999_800}},
		{Take, "a", 300, Answer{Code: Allowed, InUse: 2}}, // held: renewed, counted once
		{Release, "a", 400, Answer{Code: Allowed, InUse: 1}},
		{Release, "a", 500, Answer{Code: Denied, InUse: 1}}, // twice frees nothing
		{Renew, "a", 600, Answer{Code: Denied, InUse: 1}},
		{Renew, "b", 700, Answer{Code: Allowed, InUse: 1}}, // b now expires at 1_000_700
		{Take, "c", 800, Answer{Code: Allowed, InUse: 2}},
		{Take, "d", 900, Answer{Code: Denied, InUse: 2, RetryMicros: 999_800}}, // b, renewed, is first
		{Take, "d", 1_000_700, Answer{Code: Allowed, InUse: 2}},                // b expired at its time
		{Release, "b", 1_000_701, Answer{Code: Denied, InUse: 2}},              // after expiry: nothing
		{Take, "e", 1_000_800, Answer{Code: Allowed, InUse: 2}},                // c expired too
	}
	for i, st := range steps {
		if got := s.Do(st.op, st.id, st.now, 2, lease, false); got != st.want {
			t.Errorf("step %d: %s %s at %d: %+v, want %+v", i+1, st.op, st.id, st.now, got, st.want)
		}
	}
}

func TestShadowTakesAnyway(t *testing.T) {
	var s Set
	s.Do(Take, "a", 0, 1, 1000, true)
	if got := s.Do(Take, "b", 10, 1, 1000, true); got != (Answer{Code: WouldDeny, InUse: 2, RetryMicros: 990}) {
		t.Errorf("at the limit in shadow mode: %+v", got)
	}
	if got := s.Do(Take, "c", 20, 1, 1000, true); got.Code != WouldDeny || got.InUse != 3 {
		t.Errorf("in use counts what runs: %+v", got)
	}
	if got := s.Do(Take, "d", 20, 1, 1000, false); got.Code != Denied || got.InUse != 3 {
		t.Errorf("shadow off: %+v", got)
	}
}

// TestRenewalsBounded: a slot renewed many times leaves stale heap
// entries, which must not grow without bound.
func TestRenewalsBounded(t *testing.T) {
	var s Set
	for i := range 10_000 {
		now := int64(i)
		if got := s.Do(Renew, "x", now, 5, 1000, false); i > 0 && got.Code != Allowed {
			t.Fatalf("renew %d: %+v", i, got)
		}
		if i == 0 {
			s.Do(Take, "x", now, 5, 1000, false)
		}
		s.Do(Take, "y"+strconv.Itoa(i%3), now, 5, 1000, false)
	}
	if len(s.byExpiry) > 2*len(s.held)+17 {
		t.Errorf("%d heap entries for %d slots", len(s.byExpiry), len(s.held))
	}
	if !s.Empty(1_000_000) {
		t.Error("every slot expired, yet the set is not empty")
	}
}
