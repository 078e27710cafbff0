package client

import (
	"math"
	"sync"
	"time"
)

// Pacing: how many round trips a batcher lets in flight while Redis
// answers. A caller that finds a place free sends at once, so the number
// of places decides when calls start to go together. Going together costs
// a queued call the wait for a round trip to end; it saves the fixed cost
// of a round trip (system calls and wake-ups, in the client and in Redis),
// most of a lone call's CPU time. That saving is worth the wait only while
// something is saturated: then every extra round trip in flight only waits
// in a queue (Redis's, the network's, or for a core shared with Redis),
// and takes CPU time that the calls could use.
//
// Saturation shows in the round trips' own times, whatever its cause and
// whatever the machine: pace keeps base, the mean time of a round trip of
// one call when they were fastest (a floor remembered for minutes), and
// after every paceEpoch round trips compares their mean time with it.
// Below paceTolerance times base, places are added (up to one per pooled
// connection: a caller never waits while a connection could carry its
// call); beyond it, they are removed in proportion, down to paceFloor, so
// that round trips take about paceTolerance times base at most. On an idle
// machine or at low concurrency round trips stay near base and every
// caller sends alone, as a plain call would; when the client's cores,
// Redis or the network saturate, calls go together in as few round trips
// as keep round-trip times near base. No knob: base and the tolerance are
// ratios of what the Limiter itself measures.

const (
	// paceEpoch is how many round trips each adjustment looks at.
	paceEpoch = 32
	// paceBaseEpoch is how many lone round trips make one sample of base;
	// the mean of many is a floor that single fast round trips do not
	// drag down.
	paceBaseEpoch = 64
	// paceTolerance is how much longer than base round trips may take
	// before places are removed. On a quiet 2-core machine shared with
	// Redis, lone callers' round trips take 2.6 times base at 10 callers
	// and 4.1 times at 20, where Redis saturates (throughput stops
	// growing); at 2.5 calls went together from 5 callers on, where it
	// cost a fifth of the throughput. A pipeline's round trip takes
	// longer than a lone one's by itself, so a tolerance too close to
	// the unsaturated times also keeps batches once they formed.
	paceTolerance = 4
	// paceFloor is the fewest places: one round trip in Redis while the
	// next is being built and the last one's answers handed out.
	paceFloor = 2
	// paceAging is how long base takes to grow by itself by its own size,
	// so that a lasting change of the path to Redis is learnt within
	// minutes.
	paceAging = int64(10 * time.Minute)
	// paceProbeEvery: when no sample of base came within paceConfirm of it
	// for that long (the Limiter was busy all along), or none came at all,
	// pace asks for a probe: paceProbeRoundTrips lone round trips, one at a
	// time with nothing else in flight, whose mean is a sample of base.
	// The calls that arrive meanwhile wait a few round trips (every 10 s
	// at most).
	paceProbeEvery      = int64(10 * time.Second)
	paceProbeRoundTrips = 8
	// paceConfirm: a sample of base within this ratio of it confirms it.
	paceConfirm = 1.25
)

// clockStart is the origin of nanotime.
var clockStart = time.Now()

// nanotime is a monotonic clock in ns.
func nanotime() int64 { return int64(time.Since(clockStart)) }

// pace decides the places of a batcher from its round trips' times. The
// zero value is ready; it is safe for concurrent use.
type pace struct {
	mu sync.Mutex
	// base is the lowest mean time of lone round trips sampled, at baseAt
	// (ns of nanotime), 0 until sampled; confirmed is when a sample last
	// came within paceConfirm of it, probed when a probe was last asked.
	base, baseAt      int64
	confirmed, probed int64
	ln, lsum          int64 // lone round trips since the last sample of base
	pn, psum          int64 // probe round trips since the last sample of base
	n, sum            int64 // round trips since the last adjustment
	places            int   // the places decided, 0 until the first adjustment
}

// roundTrip records a round trip of size calls answered by Redis that
// took rtt ns, ending at now, sent for a probe or not. It returns the
// places to allow from now on, at most full (0 keeps them), and whether to
// start a probe.
func (p *pace) roundTrip(size int, rtt, now int64, full int, probe bool) (places int, startProbe bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if probe {
		p.pn++
		p.psum += rtt
		if p.pn == paceProbeRoundTrips {
			p.sampleBase(p.psum/p.pn, now)
			p.pn, p.psum = 0, 0
		}
		return 0, false
	}
	if size == 1 {
		p.ln++
		p.lsum += rtt
		if p.ln == paceBaseEpoch {
			p.sampleBase(p.lsum/p.ln, now)
			p.ln, p.lsum = 0, 0
		}
	}
	p.n++
	p.sum += rtt
	if p.n < paceEpoch {
		return 0, false
	}
	mean := float64(p.sum) / float64(p.n)
	p.n, p.sum = 0, 0
	if (p.base == 0 || now-p.confirmed > paceProbeEvery) && now-p.probed > paceProbeEvery {
		p.probed, startProbe = now, true
	}
	if p.base == 0 {
		return 0, startProbe // no floor known yet: keep one place per connection
	}
	places = p.places
	if places == 0 {
		places = full
	}
	// Proportional, at most halved or grown by half (and one) at a time.
	k := float64(places) * paceTolerance * float64(p.aged(now)) / mean
	k = min(max(k, float64(places)/2), float64(places)*3/2+1)
	p.places = max(paceFloor, min(full, int(math.Round(k))))
	return p.places, startProbe
}

// sampleBase takes mean, the mean time of lone round trips ending at
// now, as a sample of base.
func (p *pace) sampleBase(mean, now int64) {
	a := p.aged(now)
	switch {
	case p.base == 0 || mean < a:
		p.base, p.baseAt, p.confirmed = mean, now, now
	case float64(mean) <= float64(a)*paceConfirm:
		p.confirmed = now
	}
}

// aged is base at now: base grows by itself by its size every paceAging.
func (p *pace) aged(now int64) int64 {
	return p.base + int64(float64(p.base)*float64(now-p.baseAt)/float64(paceAging))
}
