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
	left, ok, a := l.Take(-5, 1, false)
	if ok || left != -5 || a != (Answer{Code: Denied, Remaining: 0, RetryMicros: 12_000_000, ResetMicros: 30_000_000}) {
		t.Errorf("5 in debt, n 1: %v %v %+v, want denied, retry 12 s (6 tokens), reset 30 s", left, ok, a)
	}
	if _, _, a := l.Take(-5, 1, true); a.Code != WouldDeny {
		t.Errorf("shadow: %+v", a)
	}
	if left, ok, a := l.Take(3.5, 3, false); !ok || left != 0.5 || a.Remaining != 0 || a.ResetMicros != 19_000_000 {
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
	fa, ok, a := l.KeyTake(fa, 2, now, false)
	if !ok || fa != 7_000_000 || a.Remaining != 0 || a.ResetMicros != 2_000_000 {
		t.Fatalf("take 2 of 2: %v %v %+v", fa, ok, a)
	}
	if _, ok, a := l.KeyTake(fa, 1, now, false); ok || a.RetryMicros != 1_000_000 {
		t.Fatalf("empty key: %v %+v", ok, a)
	}
	if got := l.KeyFullAt(1e18, true, now); got != 7_000_000 {
		t.Errorf("a key owes no more than it holds: %v", got)
	}
}
