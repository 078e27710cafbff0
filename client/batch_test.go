package client

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeTransport answers every call with its n argument. While gated it
// holds each round trip until release; it records the n of every batch.
type fakeTransport struct {
	mu       sync.Mutex
	batches  [][]int64
	gate     chan struct{} // nil: answer at once
	entered  chan struct{} // receives one value per round trip started
	inflight atomic.Int32
	most     atomic.Int32
}

func newFake(gated bool) *fakeTransport {
	f := &fakeTransport{entered: make(chan struct{}, 1000)}
	if gated {
		f.gate = make(chan struct{})
	}
	return f
}

func (f *fakeTransport) send(calls []*call) {
	n := f.inflight.Add(1)
	for m := f.most.Load(); n > m && !f.most.CompareAndSwap(m, n); m = f.most.Load() {
	}
	var ns []int64
	for _, c := range calls {
		ns = append(ns, c.args[5].(int64))
	}
	f.mu.Lock()
	f.batches = append(f.batches, ns)
	gate := f.gate
	f.mu.Unlock()
	select {
	case f.entered <- struct{}{}:
	default: // nobody counts them
	}
	if gate != nil {
		<-gate
	}
	for _, c := range calls {
		c.reply = []int64{c.args[5].(int64)}
	}
	f.inflight.Add(-1)
}

// release lets every held and later round trip through.
func (f *fakeTransport) release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gate != nil {
		close(f.gate)
		f.gate = nil
	}
}

func (f *fakeTransport) recorded() [][]int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.batches)
}

func newCall(n int64) *call {
	c := getCall()
	c.args, c.nargs = [10]any{"evalsha", "sha", "1", "key", "app", n, "2"}, 7
	return c
}

// queued waits, without a clock, until n calls wait in b's queue.
func queued(b *batcher, n int) {
	for {
		b.mu.Lock()
		k := len(b.queue)
		b.mu.Unlock()
		if k >= n {
			return
		}
		runtime.Gosched()
	}
}

type outcome struct {
	reply []int64
	err   error
}

func doAsync(b *batcher, ctx context.Context, n int64) chan outcome {
	ch := make(chan outcome, 1)
	go func() {
		r, err := b.do(ctx, newCall(n), time.Hour)
		ch <- outcome{r, err}
	}()
	return ch
}

func TestBatcherLoneCallIsSentAloneAtOnce(t *testing.T) {
	f := newFake(false)
	b := newBatcher(f.send, 2, false)
	for i := range int64(3) {
		r, err := b.do(context.Background(), newCall(i+1), time.Hour)
		if err != nil || !slices.Equal(r, []int64{i + 1}) {
			t.Fatalf("call %d: %v %v", i+1, r, err)
		}
	}
	if got := f.recorded(); !slices.EqualFunc(got, [][]int64{{1}, {2}, {3}}, slices.Equal) {
		t.Fatalf("batches %v, want each call alone", got)
	}
}

func TestBatcherCoalescesCallsQueuedWhileRoundTripsAreInFlight(t *testing.T) {
	f := newFake(true)
	b := newBatcher(f.send, 1, false)
	first := doAsync(b, context.Background(), 1)
	<-f.entered // the only place is taken
	var later []chan outcome
	for n := int64(2); n <= 5; n++ {
		later = append(later, doAsync(b, context.Background(), n))
	}
	queued(b, 4)
	f.release()
	for i, ch := range append([]chan outcome{first}, later...) {
		o := <-ch
		if o.err != nil || !slices.Equal(o.reply, []int64{int64(i + 1)}) {
			t.Fatalf("call %d: %v %v", i+1, o.reply, o.err)
		}
	}
	got := f.recorded()
	if len(got) != 2 {
		t.Fatalf("batches %v, want the first call alone and the four queued ones together", got)
	}
	last := slices.Clone(got[1])
	slices.Sort(last)
	if !slices.Equal(last, []int64{2, 3, 4, 5}) {
		t.Fatalf("second batch %v, want [2 3 4 5]", got[1])
	}
}

func TestBatcherNeverExceedsItsRoundTrips(t *testing.T) {
	f := newFake(false)
	b := newBatcher(f.send, 2, false)
	var wg sync.WaitGroup
	var wrong atomic.Int32
	for g := range int64(40) {
		wg.Go(func() {
			for i := range int64(200) {
				n := g*1000 + i + 1
				r, err := b.do(context.Background(), newCall(n), time.Hour)
				if err != nil || !slices.Equal(r, []int64{n}) {
					wrong.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if wrong.Load() != 0 {
		t.Fatalf("%d calls got another call's reply or an error", wrong.Load())
	}
	if m := f.most.Load(); m > 2 {
		t.Fatalf("%d round trips in flight at once, want at most 2", m)
	}
	calls := 0
	for _, batch := range f.recorded() {
		calls += len(batch)
	}
	if calls != 40*200 {
		t.Fatalf("%d calls sent, want %d: each exactly once", calls, 40*200)
	}
}

func TestBatcherDropsCallsWhoseCallerGaveUpWhileQueued(t *testing.T) {
	f := newFake(true)
	b := newBatcher(f.send, 1, false)
	first := doAsync(b, context.Background(), 1)
	<-f.entered
	ctx, cancel := context.WithCancel(context.Background())
	gone := doAsync(b, ctx, 2)
	queued(b, 1)
	kept := doAsync(b, context.Background(), 3)
	queued(b, 2)
	cancel()
	if o := <-gone; !errors.Is(o.err, errAbandoned) {
		t.Fatalf("cancelled call: %v %v, want errAbandoned", o.reply, o.err)
	}
	f.release()
	if o := <-first; o.err != nil {
		t.Fatal(o.err)
	}
	if o := <-kept; o.err != nil || !slices.Equal(o.reply, []int64{3}) {
		t.Fatalf("queued call: %v %v", o.reply, o.err)
	}
	if got := f.recorded(); !slices.EqualFunc(got, [][]int64{{1}, {3}}, slices.Equal) {
		t.Fatalf("batches %v: the abandoned call was sent", got)
	}
}

func TestBatcherCloseFailsQueuedAndLaterCalls(t *testing.T) {
	f := newFake(true)
	b := newBatcher(f.send, 1, false)
	first := doAsync(b, context.Background(), 1)
	<-f.entered
	waiting := doAsync(b, context.Background(), 2)
	queued(b, 1)
	b.close()
	if o := <-waiting; !errors.Is(o.err, ErrClosed) {
		t.Fatalf("queued call after close: %v %v, want ErrClosed", o.reply, o.err)
	}
	if _, err := b.do(context.Background(), newCall(3), time.Hour); !errors.Is(err, ErrClosed) {
		t.Fatalf("call after close: %v, want ErrClosed", err)
	}
	f.release()
	if o := <-first; o.err != nil || !slices.Equal(o.reply, []int64{1}) {
		t.Fatalf("call in flight at close: %v %v", o.reply, o.err)
	}
}

func TestBatcherDetachedCallerStopsWaitingAtItsTimeout(t *testing.T) {
	f := newFake(true)
	b := newBatcher(f.send, 1, true)
	_, err := b.do(context.Background(), newCall(1), time.Millisecond)
	if !errors.Is(err, errTimeout) {
		t.Fatalf("call held by the transport: %v, want errTimeout", err)
	}
	f.release()
	// The place is given back once the round trip ends: later calls go through.
	r, err := b.do(context.Background(), newCall(2), time.Hour)
	if err != nil || !slices.Equal(r, []int64{2}) {
		t.Fatalf("call after the held one: %v %v", r, err)
	}
}

// TestRoundTripContext: round trips share a deadline context while at
// least 7/8 of the timeout is left of it, and no round trip's deadline is
// ever later than the timeout from its start.
func TestRoundTripContext(t *testing.T) {
	const timeout = time.Hour
	s := &sender{timeout: timeout}
	before := time.Now()
	first := s.roundTripContext()
	dl, ok := first.Deadline()
	if !ok || dl.Before(before.Add(timeout)) || dl.After(time.Now().Add(timeout)) {
		t.Fatalf("deadline %v, %v: want the timeout from now", dl, ok)
	}
	if again := s.roundTripContext(); again != first {
		t.Fatal("a round trip just after another did not share its context")
	}
	// The shared context has less than 7/8 of the timeout left: a new one.
	old := s.deadline.Load()
	s.deadline.Store(&sharedDeadline{ctx: old.ctx, cancel: old.cancel, start: time.Now().Add(-timeout / 8)})
	start := time.Now()
	next := s.roundTripContext()
	if next == first {
		t.Fatal("a context with less than 7/8 of the timeout left was reused")
	}
	if dl, _ := next.Deadline(); dl.Before(start.Add(timeout)) {
		t.Fatalf("new deadline %v is less than the timeout from now", dl)
	}
	old.cancel()
	s.deadline.Load().cancel()
}

// TestBatcherNarrowsWhileRedisFails: while failing, one round trip is in
// flight (the rest queue, then go together), whatever the limit; the next
// answer restores the limit.
func TestBatcherNarrowsWhileRedisFails(t *testing.T) {
	f := newFake(true)
	b := newBatcher(f.send, 4, false)
	b.failing(true)
	first := doAsync(b, context.Background(), 1)
	<-f.entered
	var later []chan outcome
	for n := int64(2); n <= 4; n++ {
		later = append(later, doAsync(b, context.Background(), n))
	}
	queued(b, 3) // not sent: the one place is taken
	f.release()
	for i, ch := range append([]chan outcome{first}, later...) {
		if o := <-ch; o.err != nil || !slices.Equal(o.reply, []int64{int64(i + 1)}) {
			t.Fatalf("call %d: %v %v", i+1, o.reply, o.err)
		}
	}
	if got := f.recorded(); len(got) != 2 || f.most.Load() != 1 {
		t.Fatalf("batches %v, %d at most in flight: want one alone, then three together, one at a time", got, f.most.Load())
	}

	// Widened again: four callers are each sent at once, side by side.
	b.failing(false)
	f2 := newFake(true)
	b.send = f2.send
	var chs []chan outcome
	for n := int64(1); n <= 4; n++ {
		chs = append(chs, doAsync(b, context.Background(), n))
	}
	for range 4 {
		<-f2.entered
	}
	f2.release()
	for _, ch := range chs {
		if o := <-ch; o.err != nil {
			t.Fatal(o.err)
		}
	}
	if f2.most.Load() != 4 {
		t.Fatalf("%d round trips at most in flight after the failure ended, want 4", f2.most.Load())
	}
}

// TestBatcherNarrowedWithRoundTripsInFlight: narrowed while more round
// trips are in flight than one, queued calls wait until only one is left
// before the next goes out.
func TestBatcherNarrowedWithRoundTripsInFlight(t *testing.T) {
	f := newFake(true)
	b := newBatcher(f.send, 3, false)
	var chs []chan outcome
	for n := int64(1); n <= 3; n++ {
		chs = append(chs, doAsync(b, context.Background(), n))
	}
	for range 3 {
		<-f.entered
	}
	b.failing(true)
	chs = append(chs, doAsync(b, context.Background(), 4))
	queued(b, 1)
	f.release()
	for i, ch := range chs {
		if o := <-ch; o.err != nil || !slices.Equal(o.reply, []int64{int64(i + 1)}) {
			t.Fatalf("call %d: %v %v", i+1, o.reply, o.err)
		}
	}
	if got := f.recorded(); len(got) != 4 {
		t.Fatalf("batches %v, want four", got)
	}
	b.mu.Lock()
	inflight := b.inflight
	b.mu.Unlock()
	if inflight != 0 {
		t.Fatalf("%d places still taken after every call ended", inflight)
	}
}
