package tokens

import "testing"

func TestRefill(t *testing.T) {
	l := Limit{Capacity: 10, PermitsMicro: 500_000, Period: 1} // half a token a second
	if got, ts := l.Refill(2, 1_000_000, 3_000_000); got != 3 || ts != 3_000_000 {
		t.Errorf("2 s at 0.5/s onto 2: %v at %d, want 3 at 3000000", got, ts)
	}
	if got, ts := l.Refill(2, 3_000_000, 1_000_000); got != 2 || ts != 3_000_000 {
		t.Errorf("a clock that went back: %v at %d, want 2 at 3000000 (nothing added, ts kept)", got, ts)
	}
	if got, _ := l.Refill(9, 0, 100_000_000); got != 10 {
		t.Errorf("never above capacity: %v", got)
	}
	if got, _ := l.Refill(-5, 0, 2_000_000); got != -4 {
		t.Errorf("a debt refills like any count: %v, want -4", got)
	}
}

func TestTakeDebt(t *testing.T) {
	l := Limit{Capacity: 10, PermitsMicro: 1_000_000, Period: 2} // a token every 2 s
	left, ok, a := l.Take(-5, 1, false, false)
	if ok || left != -5 || a != (Answer{Code: Denied, Remaining: 0, RetryMicros: 12_000_000, ResetMicros: 30_000_000}) {
		t.Errorf("5 in debt, n 1: %v %v %+v, want denied, retry 12 s (6 tokens), reset 30 s", left, ok, a)
	}
	if _, _, a := l.Take(-5, 1, true, false); a.Code != WouldDeny {
		t.Errorf("shadow: %+v", a)
	}
	if left, ok, a := l.Take(3.5, 3, false, false); !ok || left != 0.5 || a.Remaining != 0 || a.ResetMicros != 19_000_000 {
		t.Errorf("3.5 - 3: %v %v %+v", left, ok, a)
	}
}

func TestAdjustBounds(t *testing.T) {
	l := Limit{Capacity: 10, PermitsMicro: 1, Period: 1}
	if got, applied := l.Adjust(4, 20); got != 10 || applied != 6 {
		t.Errorf("refund past capacity: %v %d", got, applied)
	}
	if got, applied := l.Adjust(4, -25); got != -10 || applied != 14 {
		t.Errorf("charge past the debt bound: %v %d", got, applied)
	}
}

func TestMicrosCap(t *testing.T) {
	l := Limit{Capacity: 1_000_000_000, PermitsMicro: 1, Period: 31536000}
	if got := l.Until(1e9); got != MaxMicros {
		t.Errorf("the slowest rate: %d, want the cap", got)
	}
	if Micros(-1) != 0 || Micros(0.2) != 1 {
		t.Error("Micros rounds up, from 0")
	}
}

func TestKeyTake(t *testing.T) {
	l := Limit{Capacity: 2, PermitsMicro: 1_000_000, Period: 1}
	now := int64(5_000_000)
	fa := l.KeyFullAt(0, false, now)
	fa, ok, a := l.KeyTake(fa, 2, now, false, false)
	if !ok || fa != 7_000_000 || a.Remaining != 0 || a.ResetMicros != 2_000_000 {
		t.Fatalf("take 2 of 2: %v %v %+v", fa, ok, a)
	}
	if _, ok, a := l.KeyTake(fa, 1, now, false, false); ok || a.RetryMicros != 1_000_000 {
		t.Fatalf("empty key: %v %+v", ok, a)
	}
	if got := l.KeyFullAt(1e18, true, now); got != 7_000_000 {
		t.Errorf("a key owes no more than it holds: %v", got)
	}
}

func TestTakeReserve(t *testing.T) {
	l := Limit{Capacity: 10, PermitsMicro: 1_000_000, Period: 1, Reserve: 4} // a token a second, 4 kept
	if left, ok, a := l.Take(7, 3, false, false); !ok || left != 4 || a.Remaining != 0 || a.ResetMicros != 6_000_000 {
		t.Errorf("7 - 3 leaves the reserve: %v %v %+v", left, ok, a)
	}
	left, ok, a := l.Take(4.5, 1, false, false)
	if ok || left != 4.5 || a != (Answer{Code: Denied, Remaining: 0, RetryMicros: 500_000, ResetMicros: 5_500_000}) {
		t.Errorf("not critical, 4.5 held: %v %v %+v, want denied until 5 are there", left, ok, a)
	}
	if left, ok, a := l.Take(4.5, 4, false, true); !ok || left != 0.5 || a.Remaining != 0 {
		t.Errorf("critical takes the reserve: %v %v %+v", left, ok, a)
	}
	// In debt: the wait covers the debt, the reserve and n.
	if _, _, a := l.Take(-2, 1, false, false); a.RetryMicros != 7_000_000 {
		t.Errorf("2 in debt, not critical: %+v, want 7 s", a)
	}
	if _, _, a := l.Take(-2, 1, true, false); a.Code != WouldDeny || a.RetryMicros != 7_000_000 {
		t.Errorf("shadow: %+v", a)
	}
	if !l.Exceeds(7, false) || l.Exceeds(6, false) || l.Exceeds(10, true) || !l.Exceeds(11, true) {
		t.Error("a request not marked critical can take at most capacity - reserve")
	}
	for _, r := range []int64{-1, 0, 10, 11} {
		if got := (Limit{Capacity: 10, Reserve: r}).Kept(false); got != 0 {
			t.Errorf("reserve %d keeps %d, want none", r, got)
		}
	}
}

func TestKeyTakeReserve(t *testing.T) {
	l := Limit{Capacity: 4, PermitsMicro: 1_000_000, Period: 1, Reserve: 1}
	now := int64(5_000_000)
	fa, ok, a := l.KeyTake(l.KeyFullAt(0, false, now), 3, now, false, false)
	if !ok || a.Remaining != 0 || a.ResetMicros != 3_000_000 {
		t.Fatalf("3 of 4, 1 kept: %v %+v", ok, a)
	}
	if _, ok, a := l.KeyTake(fa, 1, now, false, false); ok || a.RetryMicros != 1_000_000 || a.Remaining != 0 {
		t.Fatalf("the reserve is left: %v %+v", ok, a)
	}
	if _, ok, a := l.KeyTake(fa, 1, now, false, true); !ok || a.ResetMicros != 4_000_000 {
		t.Fatalf("critical: %v %+v", ok, a)
	}
}

func TestScaleReserve(t *testing.T) {
	for _, c := range [][4]int64{{3, 10, 100, 30}, {3, 10, 3, 0}, {3, 10, 7, 2}, {0, 10, 7, 0}, {10, 10, 7, 0},
		{999_999_999, 1_000_000_000, 1_000_000_000, 999_999_999}, {1, 1_000_000_000, 999_999_999, 0}} {
		if got := ScaleReserve(c[0], c[1], c[2]); got != c[3] {
			t.Errorf("ScaleReserve(%d, %d, %d) = %d, want %d", c[0], c[1], c[2], got, c[3])
		}
	}
}
