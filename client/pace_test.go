package client

import (
	"context"
	"slices"
	"testing"
	"time"
)

// loop drives p as a Limiter with callers callers always calling would,
// for d of simulated time, on a system that answers rate(places) calls a
// second when at most places round trips are in flight, with full
// connections. It returns the share of the time spent at each number of
// places and the trials run (windows at other places than the held ones).
func loop(p *pace, callers, full int, rate func(places int) float64, d time.Duration) (share map[int]float64, trials int) {
	share = map[int]float64{}
	limit, now, end := full, int64(1), int64(d)
	if p.places > 0 {
		limit = p.places
	}
	for now < end {
		inFlight := min(limit, callers)
		size := (callers + inFlight - 1) / inFlight
		// One round trip of size calls ends every size/rate seconds.
		step := int64(float64(size) / rate(limit) * 1e9)
		now += step
		share[limit] += float64(step) / float64(end)
		if pl := p.roundTrip(size, inFlight, now, full); pl > 0 {
			if p.phase == trying {
				trials++
			}
			limit = pl
		}
	}
	return share, trials
}

// unsaturated answers every caller in flight at once at 30,000 calls a
// second; fewer places than callers cost 10% (5 callers on 2 cores).
func unsaturated(callers int) func(int) float64 {
	return func(places int) float64 {
		if places < callers {
			return 27_000
		}
		return 30_000
	}
}

// saturated answers more calls a second the fewer the places, down to 2
// (20 callers on 2 cores: calls going together save the cores' time).
func saturated(places int) float64 { return 40_000 * 20 / float64(10+places) }

func TestPaceHoldsEveryPlaceWhileFewerCostThroughput(t *testing.T) {
	var p pace
	share, trials := loop(&p, 5, 20, unsaturated(5), 60*time.Second)
	if p.places != 0 {
		t.Fatalf("held %d places after a minute of 5 callers that fewer places slow down, want every one (0)", p.places)
	}
	if fewer := 1 - share[20]; fewer > 2.0/paceMaxWait {
		t.Fatalf("%.2f%% of the time at fewer places than the pool's, want at most one window in %d (trials only)",
			100*fewer, paceMaxWait/2)
	}
	// Trials back off: one in 64 windows at most once they keep failing.
	if windows := 60 * time.Second / time.Duration(paceWindow); trials > int(windows)/paceMaxWait+20 {
		t.Fatalf("%d trials over %d windows, want about one in %d", trials, windows, paceMaxWait)
	}
	// A trial holds fewer places than the callers in flight, not than
	// the pool's connections: 5 callers in 20 places try 3.
	if share[3] == 0 || share[12] != 0 {
		t.Fatalf("time at 3 places %.4f, at 12 %.4f: want the trials at 3 (5 in flight / %v)", share[3], share[12], paceStep)
	}
}

func TestPaceRemovesPlacesWhileFewerGainThroughput(t *testing.T) {
	var p pace
	loop(&p, 20, 20, saturated, time.Second)
	if p.places != paceFloor {
		t.Fatalf("held %d places after a second of 20 callers whom fewer places speed up, want the floor %d", p.places, paceFloor)
	}
	// The same callers no longer gain: the places come back.
	loop(&p, 20, 20, unsaturated(20), 60*time.Second)
	if p.places != 0 {
		t.Fatalf("held %d places after a minute where fewer cost throughput, want every one (0)", p.places)
	}
}

func TestPaceAddsPlacesBackWhenTheyCostNothing(t *testing.T) {
	// Calls come at a rate of their own (a service's steady traffic):
	// places change nothing, and with a tie pace holds more, so callers
	// wait less.
	p := pace{places: paceFloor}
	loop(&p, 20, 20, func(int) float64 { return 10_000 }, 10*time.Second)
	if p.places != 0 {
		t.Fatalf("held %d places where every number answers alike, want every one (0)", p.places)
	}
}

func TestPaceTriesOnlyWhatCanChangeSomething(t *testing.T) {
	// Two callers: no fewer places than the floor, and no more than the
	// round trips in flight ever need.
	var p pace
	if _, trials := loop(&p, 2, 20, unsaturated(2), 10*time.Second); trials != 0 {
		t.Fatalf("%d trials with 2 callers, want none", trials)
	}
}

func TestPaceDropsATrialAcrossAPause(t *testing.T) {
	var p pace
	now := int64(1)
	step := func(k int, gap int64) int {
		pl := 0
		for range k {
			now += gap
			if got := p.roundTrip(1, 5, now, 20); got > 0 {
				pl = got
			}
		}
		return pl
	}
	step(1, 0)
	// A window of 5 in flight, then a trial starts at 3 places.
	if pl := step(paceWindowRoundTrips, paceWindow); pl != 3 || p.phase != trying {
		t.Fatalf("places %d, phase %d after the first window, want a trial at 3", pl, p.phase)
	}
	// Calls pause for two seconds in the trial's window: it is dropped
	// and the held places come back.
	if pl := step(paceWindowRoundTrips, 2*paceStale/paceWindowRoundTrips); pl != 20 || p.phase != held {
		t.Fatalf("places %d, phase %d after a pause in the trial, want 20 held again", pl, p.phase)
	}
}

// TestBatcherRaisedPlacesTakeTheQueue: when places are added while calls
// queue, the next caller goes at once and takes the queued calls along.
func TestBatcherRaisedPlacesTakeTheQueue(t *testing.T) {
	f := newFake(true)
	b := newBatcher(f.send, 1, false)
	first := doAsync(b, context.Background(), 1)
	<-f.entered
	var chs []chan outcome
	for n := int64(2); n <= 3; n++ {
		chs = append(chs, doAsync(b, context.Background(), n))
		queued(b, int(n-1))
	}
	b.mu.Lock()
	b.paced, b.limit = 2, 2
	b.mu.Unlock()
	chs = append(chs, doAsync(b, context.Background(), 4))
	<-f.entered // sent while the first is still in flight
	f.release()
	for i, ch := range append([]chan outcome{first}, chs...) {
		if o := <-ch; o.err != nil || !slices.Equal(o.reply, []int64{int64(i + 1)}) {
			t.Fatalf("call %d: %v %v", i+1, o.reply, o.err)
		}
	}
	got := f.recorded()
	if len(got) != 2 || !slices.Equal(got[1], []int64{4, 2, 3}) {
		t.Fatalf("batches %v, want [1] then [4 2 3]", got)
	}
}

// TestBatcherTellsPaceTheRoundTripsInFlight: each round trip reports how
// many were in flight when it took its place, a free one or a promoted
// call's.
func TestBatcherTellsPaceTheRoundTripsInFlight(t *testing.T) {
	run := func(limit int, n int64) *pace {
		f := newFake(true)
		b := newBatcher(f.send, limit, false)
		var chs []chan outcome
		for k := range n {
			chs = append(chs, doAsync(b, context.Background(), k+1))
			if int(k) < limit {
				<-f.entered
			} else {
				queued(b, int(k)-limit+1)
			}
		}
		f.release()
		for _, ch := range chs {
			if o := <-ch; o.err != nil {
				t.Fatal(o.err)
			}
		}
		return &b.pace
	}
	// One place: the first round trip starts pace's window; the two
	// queued calls go together when promoted, with 1 in flight.
	if p := run(1, 3); p.rts != 1 || p.calls != 2 || p.peak != 1 {
		t.Fatalf("promoted: pace counted %d round trips, %d calls, at most %d in flight; want 1, 2, 1", p.rts, p.calls, p.peak)
	}
	// Two free places: whichever ends second counts, with 1 or 2 in
	// flight when it took its place.
	if p := run(2, 2); p.rts != 1 || p.calls != 1 || p.peak < 1 {
		t.Fatalf("free places: pace counted %d round trips, %d calls, at most %d in flight; want 1, 1, 1 or 2", p.rts, p.calls, p.peak)
	}
}
