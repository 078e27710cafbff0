package periodic

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestEveryStopsWithItsContext(t *testing.T) {
	for _, now := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		calls := 0
		task := func(context.Context) {
			calls++
			if calls == 3 {
				cancel()
			}
		}
		if now {
			NowAndEvery(ctx, time.Millisecond, task)
		} else {
			Every(ctx, time.Millisecond, task)
		}
		if calls != 3 {
			t.Errorf("now=%v: %d calls before the context ended, want 3", now, calls)
		}
	}
}

func TestNowAndEveryCallsAtOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	// An interval no test waits for: only the first call can happen.
	NowAndEvery(ctx, time.Hour, func(context.Context) { calls++; cancel() })
	if calls != 1 {
		t.Fatalf("%d calls, want 1", calls)
	}
}

func TestEveryDoesNotRunOnAnEndedContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	NowAndEvery(ctx, time.Millisecond, func(context.Context) { t.Fatal("task ran after the context ended") })
}

func TestLatch(t *testing.T) {
	var l Latch
	boom := errors.New("boom")
	for i, tc := range []struct {
		err  error
		want bool
	}{{nil, false}, {boom, true}, {boom, false}, {nil, true}, {nil, false}} {
		if got := l.Changed(tc.err); got != tc.want {
			t.Errorf("call %d (err %v): Changed = %v, want %v", i, tc.err, got, tc.want)
		}
	}
}
