// Package slots is the Go core of concurrency limits: the slot rules of
// the Lua core (internal/redisscript/lua/slots.lua, docs/protocol.md
// "Concurrency limits"), so that client/memlimit and the client's local
// failure policy answer what Redis answers for the same slots. Times are
// microseconds of the caller's clock. A Set is not safe for concurrent
// use; its zero value is an empty set.
package slots

import "container/heap"

// Codes of an Answer, as in the scripts.
const (
	Denied    = 0
	Allowed   = 1
	WouldDeny = 2
)

// Op is what a call does to a slot.
type Op string

// The operations of the slot script.
const (
	Take    Op = "take"
	Release Op = "release"
	Renew   Op = "renew"
)

// Answer is the outcome of one call, in the scripts' terms.
type Answer struct {
	// Code: for Take, Allowed (taken, or held already and renewed), Denied
	// (at the limit) or WouldDeny (at the limit in shadow mode: taken
	// anyway); for Release and Renew, Allowed when the slot was held and
	// Denied when it was not (released before, expired, never taken).
	Code int
	// InUse is the slots held after the call.
	InUse int64
	// RetryMicros is, when a Take is denied or would deny, the time until
	// the first held slot expires.
	RetryMicros int64
}

// Set is the slots held of one limit (or one key of a keyed limit): each
// slot id and when it expires.
type Set struct {
	held map[string]int64
	// byExpiry orders the held slots by expiry. An entry whose slot was
	// released or renewed since stays until it reaches the top, where it
	// is dropped: a renew or release costs no search.
	byExpiry expiries
}

// Do runs op on slot id at now, for a limit of limit slots whose slots
// expire slotMicros after they are taken or renewed; shadow is the
// limit's shadow mode. Expired slots are purged first, as the scripts do.
func (s *Set) Do(op Op, id string, now, limit, slotMicros int64, shadow bool) Answer {
	n := s.InUse(now)
	exp := now + slotMicros
	_, held := s.held[id]
	switch {
	case op == Release:
		if !held {
			return Answer{Code: Denied, InUse: n}
		}
		delete(s.held, id)
		return Answer{Code: Allowed, InUse: n - 1}
	case held:
		s.hold(id, exp)
		return Answer{Code: Allowed, InUse: n}
	case op == Renew:
		return Answer{Code: Denied, InUse: n}
	case n < limit:
		s.hold(id, exp)
		return Answer{Code: Allowed, InUse: n + 1}
	}
	retry := max(0, s.byExpiry[0].at-now)
	if !shadow {
		return Answer{Code: Denied, InUse: n, RetryMicros: retry}
	}
	s.hold(id, exp)
	return Answer{Code: WouldDeny, InUse: n + 1, RetryMicros: retry}
}

// InUse purges the slots expired at now and counts the others. A slot
// expires at its expiry time: one that expires at now is no longer held.
func (s *Set) InUse(now int64) int64 {
	for len(s.byExpiry) > 0 {
		top := s.byExpiry[0]
		if at, ok := s.held[top.id]; ok && at == top.at && at > now {
			break
		}
		heap.Pop(&s.byExpiry)
		if at, ok := s.held[top.id]; ok && at == top.at {
			delete(s.held, top.id)
		}
	}
	return int64(len(s.held))
}

// Holds reports whether slot id is held at now.
func (s *Set) Holds(id string, now int64) bool {
	at, ok := s.held[id]
	return ok && at > now
}

// Empty reports whether no slot is held at now (after purging): an empty
// set may be dropped.
func (s *Set) Empty(now int64) bool { return s.InUse(now) == 0 }

func (s *Set) hold(id string, exp int64) {
	if s.held == nil {
		s.held = map[string]int64{}
	}
	s.held[id] = exp
	heap.Push(&s.byExpiry, expiry{at: exp, id: id})
	// Renewals and releases leave stale entries: rebuild when they are
	// the majority, so the heap stays within twice the slots held.
	if len(s.byExpiry) > 2*len(s.held)+16 {
		s.byExpiry = s.byExpiry[:0]
		for id, at := range s.held {
			s.byExpiry = append(s.byExpiry, expiry{at: at, id: id})
		}
		heap.Init(&s.byExpiry)
	}
}

type expiry struct {
	at int64
	id string
}

type expiries []expiry

func (e expiries) Len() int           { return len(e) }
func (e expiries) Less(i, j int) bool { return e[i].at < e[j].at }
func (e expiries) Swap(i, j int)      { e[i], e[j] = e[j], e[i] }
func (e *expiries) Push(x any)        { *e = append(*e, x.(expiry)) }
func (e *expiries) Pop() any {
	old := *e
	x := old[len(old)-1]
	*e = old[:len(old)-1]
	return x
}
