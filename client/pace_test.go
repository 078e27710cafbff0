package client

import (
	"context"
	"slices"
	"testing"
	"time"
)

const us = int64(time.Microsecond)

// feed records k round trips of size calls taking rtt each, ending 1 µs
// apart from *now on, and returns the last places decided (0: none) and
// how many probes were asked for.
func feed(p *pace, k, size int, rtt int64, now *int64, full int) (places, probes int) {
	for range k {
		*now += us
		pl, probe := p.roundTrip(size, rtt, *now, full, false)
		if pl > 0 {
			places = pl
		}
		if probe {
			probes++
		}
	}
	return places, probes
}

func TestPaceKeepsEveryPlaceWithoutAFloorAndProbesForOne(t *testing.T) {
	var p pace
	now := int64(0)
	// Round trips of several calls only: no lone round trip, so no base.
	if places, probes := feed(&p, 1000, 5, 900*us, &now, 20); places != 0 || probes != 0 {
		t.Fatalf("places %d, %d probes without any lone round trip in the first ms: want none", places, probes)
	}
	// Still none after a while: a probe is asked for, once every paceProbeEvery.
	now += paceProbeEvery
	if places, probes := feed(&p, 1000, 5, 900*us, &now, 20); places != 0 || probes != 1 {
		t.Fatalf("places %d, %d probes after %v without a lone round trip: want none decided, one probe",
			places, probes, time.Duration(paceProbeEvery))
	}
	for range paceProbeRoundTrips {
		now += us
		p.roundTrip(1, 100*us, now, 20, true)
	}
	if p.base != 100*us {
		t.Fatalf("base %v after the probe, want 100µs", time.Duration(p.base))
	}
	if places, _ := feed(&p, paceEpoch, 5, time.Millisecond.Nanoseconds(), &now, 20); places != 10 {
		t.Fatalf("places %d with round trips at 10 base after the probe, want 10 (halved at most)", places)
	}
}

func TestPaceKeepsEveryPlaceWhileRoundTripsStayNearBase(t *testing.T) {
	var p pace
	now := int64(0)
	feed(&p, paceBaseEpoch, 1, 100*us, &now, 20) // base: 100 µs
	// Twice as long as base: below the tolerance, every place stays.
	places, _ := feed(&p, 10*paceEpoch, 1, 200*us, &now, 20)
	if places != 20 {
		t.Fatalf("places %d with round trips at twice base, want all 20", places)
	}
}

func TestPaceRemovesPlacesWhileRoundTripsSlowDownAndAddsThemBack(t *testing.T) {
	var p pace
	now := int64(0)
	feed(&p, paceBaseEpoch, 1, 100*us, &now, 20)
	// Ten times base: places go down, to the floor and no further.
	places, _ := feed(&p, paceEpoch, 4, time.Millisecond.Nanoseconds(), &now, 20)
	if places >= 20 || places < 10 {
		t.Fatalf("places %d after one slow epoch, want fewer than 20, at most halved", places)
	}
	places, _ = feed(&p, 20*paceEpoch, 4, time.Millisecond.Nanoseconds(), &now, 20)
	if places != paceFloor {
		t.Fatalf("places %d after many slow epochs, want the floor %d", places, paceFloor)
	}
	// Back near base: every place again, and no more than the pool's.
	places, _ = feed(&p, 20*paceEpoch, 1, 110*us, &now, 20)
	if places != 20 {
		t.Fatalf("places %d once round trips are near base again, want all 20", places)
	}
	// In between: places settle where round trips take the tolerance
	// times base (here they take twice that at 20 places, so about 10).
	p = pace{}
	feed(&p, paceBaseEpoch, 1, 100*us, &now, 20)
	places, _ = feed(&p, paceEpoch, 2, int64(2*paceTolerance*100)*us, &now, 20)
	if places != 10 {
		t.Fatalf("places %d with round trips at twice the tolerance (%v) times base, want 10", places, paceTolerance)
	}
}

func TestPaceBaseIsTheFastestMeanOfLoneRoundTrips(t *testing.T) {
	var p pace
	now := int64(0)
	feed(&p, paceBaseEpoch, 1, 300*us, &now, 20)
	// One fast round trip among slow ones does not make the base.
	feed(&p, paceBaseEpoch-1, 1, 300*us, &now, 20)
	feed(&p, 1, 1, 10*us, &now, 20)
	if want := 300*us - 290*us/paceBaseEpoch; p.base < want-us {
		t.Fatalf("base %v after one fast round trip among slow ones, want about %v", time.Duration(p.base), time.Duration(want))
	}
	feed(&p, paceBaseEpoch, 1, 100*us, &now, 20)
	if p.base != 100*us {
		t.Fatalf("base %v after a faster epoch, want 100µs", time.Duration(p.base))
	}
	// Round trips of several calls never make the base.
	feed(&p, 10*paceBaseEpoch, 3, 50*us, &now, 20)
	if p.base != 100*us {
		t.Fatalf("base %v after fast round trips of 3 calls, want 100µs still", time.Duration(p.base))
	}
}

func TestPaceBaseAgesAndLearnsASlowerPath(t *testing.T) {
	var p pace
	now := int64(0)
	feed(&p, paceBaseEpoch, 1, 100*us, &now, 20)
	// Redis moved further away: lone round trips now take 400 µs. The base
	// follows within minutes, not at once.
	feed(&p, paceBaseEpoch, 1, 400*us, &now, 20)
	if p.base != 100*us {
		t.Fatalf("base %v right after the path slowed down, want 100µs still", time.Duration(p.base))
	}
	now += 4 * paceAging
	feed(&p, paceBaseEpoch, 1, 400*us, &now, 20)
	if p.base != 400*us {
		t.Fatalf("base %v long after the path slowed down, want 400µs", time.Duration(p.base))
	}
}

func TestPaceAsksForAProbeWhileBusyAndItsRoundTripsMakeTheBase(t *testing.T) {
	var p pace
	now := int64(0)
	feed(&p, paceBaseEpoch, 1, 100*us, &now, 20)
	// Busy: only round trips of several calls, for a minute.
	probes := 0
	for range 60 {
		now += int64(time.Second)
		_, k := feed(&p, paceEpoch, 10, time.Millisecond.Nanoseconds(), &now, 20)
		probes += k
	}
	if probes < 5 || probes > 6 {
		t.Fatalf("%d probes asked for over a busy minute, want one every %v", probes, time.Duration(paceProbeEvery))
	}
	// The base aged meanwhile; a probe's lone round trips bring it down.
	if p.aged(now) <= 100*us {
		t.Fatalf("base %v after a minute, want it aged", time.Duration(p.aged(now)))
	}
	for range paceProbeRoundTrips {
		now += us
		if places, probe := p.roundTrip(1, 100*us, now, 20, true); places != 0 || probe {
			t.Fatalf("a probe round trip decided places %d or asked for a probe", places)
		}
	}
	if p.base != 100*us || p.aged(now) != 100*us {
		t.Fatalf("base %v after the probe, want 100µs", time.Duration(p.aged(now)))
	}
	// Confirmed: no probe for the next paceProbeEvery.
	if _, k := feed(&p, paceEpoch, 10, time.Millisecond.Nanoseconds(), &now, 20); k != 0 {
		t.Fatalf("a probe asked for right after one confirmed the base")
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

// TestBatcherProbeSendsLoneCallsWithNothingElseInFlight: during a probe,
// the round trips in flight end, then queued calls go one at a time, each
// alone; after the probe the rest go together, and places are used again.
func TestBatcherProbeSendsLoneCallsWithNothingElseInFlight(t *testing.T) {
	f := newFake(true)
	b := newBatcher(f.send, 3, false)
	var chs []chan outcome
	for n := int64(1); n <= 2; n++ {
		chs = append(chs, doAsync(b, context.Background(), n))
		<-f.entered
	}
	b.mu.Lock()
	b.probe = 2
	b.mu.Unlock()
	for n := int64(3); n <= 6; n++ {
		chs = append(chs, doAsync(b, context.Background(), n))
		queued(b, int(n-2)) // a place is free, but a probe waits for nothing in flight
	}
	f.release()
	for i, ch := range chs {
		if o := <-ch; o.err != nil || !slices.Equal(o.reply, []int64{int64(i + 1)}) {
			t.Fatalf("call %d: %v %v", i+1, o.reply, o.err)
		}
	}
	got := f.recorded()
	// [1] [2], then the probe: [3] and [4] alone (in the order they
	// queued), then [5 6] or [6 5] together.
	if len(got) != 5 || !slices.Equal(got[2], []int64{3}) || !slices.Equal(got[3], []int64{4}) || len(got[4]) != 2 {
		t.Fatalf("batches %v, want [1] [2] [3] [4] then 5 and 6 together", got)
	}
	if f.alone[2] != 1 || f.alone[3] != 1 {
		t.Fatalf("round trips in flight when the probe's were sent: %v, want 1", f.alone[2:4])
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.probe != 0 || b.inflight != 0 {
		t.Fatalf("probe %d, %d places taken after every call ended", b.probe, b.inflight)
	}
}
