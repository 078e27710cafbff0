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
// Whether going together pays is measured, not guessed. pace counts the
// calls answered per second in windows of at least paceWindow and
// paceWindowRoundTrips round trips, and now and then runs one window with
// other places, a trial: fewer places than the round trips that were in
// flight, or more places when calls queued. Comparing the trial's calls
// per second with the windows just before and after it is Little's law
// read from outside: with the callers the same, more calls a second at
// fewer places means round trips got shorter by more than the queued
// calls waited, which is saturation, whatever its cause (the client's
// cores, Redis, the network) and whatever the machine. A trial with fewer
// places is kept when it gained more than paceGain; one with more places
// unless it lost more than paceLoss, so that while both answer alike,
// callers wait less. A trial not kept waits twice as many windows as
// before to run again in its direction (paceMaxWait at most); a trial
// kept lets both directions run again at once. No knob: every threshold
// is a ratio of what the Limiter itself measures.
//
// Round-trip times alone could not tell: on a 2-core machine a lone round
// trip takes from 35 to 180 µs depending on whether the cores were awake,
// so at 5 callers, where going together costs a tenth of the throughput,
// round trips took 3 to 5 times the fastest lone ones, as long as at 20
// callers, where it gains a third.

const (
	// paceWindow and paceWindowRoundTrips are the least a window lasts:
	// long enough that a scheduler's hiccup does not decide a trial.
	paceWindow           = int64(10 * time.Millisecond)
	paceWindowRoundTrips = 32
	// paceStale: a window longer than this (calls paused, or came too
	// slowly to fill it) measures the callers, not the places; it is
	// dropped with any trial it was part of.
	paceStale = int64(time.Second)
	// paceStep is the factor between held and tried places.
	paceStep = 1.6
	// paceGain and paceLoss are the changes in calls per second that keep
	// a trial with fewer places (a gain above 5%) and one with more (a
	// loss below 2%). Fewer places at 5 callers cost about 10%, at 20
	// they gain about 30%; but on a 2-core machine shared with Redis two
	// windows in a row differ by 6 to 12% (median), so a trial is now and
	// then kept by chance. One kept at fewer places by chance is undone
	// by the next trial with more, which needs no gain: at 5 callers,
	// fewer places than callers were held in 2 of 875 windows.
	paceGain = 1.05
	paceLoss = 0.98
	// paceMaxWait is the most held windows between two trials in one
	// direction: a trial that loses 10% for one window in 64 costs 0.2%
	// (at 5 callers, 28 trials ran in 875 windows, about 0.3%).
	paceMaxWait = 64
	// paceFloor is the fewest places: one round trip in Redis while the
	// next is being built and the last one's answers handed out.
	paceFloor = 2
)

// Trial directions.
const (
	fewer = iota
	more
)

// clockStart is the origin of nanotime.
var clockStart = time.Now()

// nanotime is a monotonic clock in ns.
func nanotime() int64 { return int64(time.Since(clockStart)) }

// pace decides the places of a batcher from the calls it answers a
// second. The zero value is ready; it is safe for concurrent use.
type pace struct {
	mu     sync.Mutex
	places int // the places held, 0 for every one (full)

	// The window being measured: since start (ns of nanotime, 0 before
	// the first round trip), rts round trips answering calls calls (more
	// calls than round trips: some went together); peak is the most round
	// trips that were in flight.
	start, rts, calls int64
	peak              int

	phase  int     // what the window is: held, trying or after
	trial  int     // the places tried, in the trial and after windows
	before float64 // calls a second of the held window before the trial
	during float64 // and of the trial

	wait, backoff [2]int // per direction: held windows until its next trial, and how many it waits after one not kept
	next          int    // the direction tried first when both are due
}

// Window phases: a held window at the held places, a trial window at
// other places, and the window after it, at the held places again, which
// judges the trial.
const (
	held = iota
	trying
	after
)

// roundTrip records a round trip of calls calls, which took its place with
// flight round trips in flight, answered by Redis at now. It returns the
// places to allow from now on, at most full (0 keeps them).
func (p *pace) roundTrip(calls, flight int, now int64, full int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.start == 0 {
		p.start = now
		return 0
	}
	p.rts++
	p.calls += int64(calls)
	p.peak = max(p.peak, flight)
	elapsed := now - p.start
	if p.rts < paceWindowRoundTrips || elapsed < paceWindow {
		return 0
	}
	rate := float64(p.calls) / float64(elapsed)
	peak, queued := p.peak, p.calls > p.rts
	p.start, p.rts, p.calls, p.peak = now, 0, 0, 0
	cur := p.places
	if cur == 0 {
		cur = full
	}
	if elapsed > paceStale {
		phase := p.phase
		p.phase = held
		if phase == trying {
			return cur
		}
		return 0
	}
	switch p.phase {
	case trying:
		p.during, p.phase = rate, after
		return cur
	case after:
		p.phase = held
		return p.judge(rate, cur, full)
	}
	for d := range p.wait {
		p.wait[d] = max(0, p.wait[d]-1)
	}
	for _, d := range [2]int{p.next, 1 - p.next} {
		if p.wait[d] > 0 {
			continue
		}
		t := 0
		switch {
		case d == fewer && min(cur, peak) > paceFloor:
			t = max(paceFloor, int(math.Round(float64(min(cur, peak))/paceStep)))
		case d == more && queued && cur < full:
			t = min(full, int(math.Ceil(float64(cur)*paceStep)))
		}
		if t > 0 {
			p.next = 1 - d
			p.phase, p.trial, p.before = trying, t, rate
			return t
		}
	}
	return 0
}

// judge ends a trial of other places than cur, the places held, given
// the calls a second of the window after it, and returns the places to
// hold.
func (p *pace) judge(rate float64, cur, full int) int {
	ref := (p.before + rate) / 2
	dir, kept := fewer, p.during > ref*paceGain
	if p.trial > cur {
		dir, kept = more, p.during >= ref*paceLoss
	}
	if !kept {
		p.backoff[dir] = min(paceMaxWait, max(1, 2*p.backoff[dir]))
		p.wait[dir] = p.backoff[dir]
		return 0
	}
	p.backoff, p.wait = [2]int{}, [2]int{}
	p.places = p.trial
	if p.places >= full {
		p.places = 0
	}
	return p.trial
}
