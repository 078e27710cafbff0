package client

import (
	"sync"
	"time"
)

// logGate lets one log line of each kind through a minute and counts the
// lines it holds back: callers choose bucket names, so a line per name
// (300 unknown names, 300 lines) would let them flood the log. Kinds are
// the client's error values, so the map stays small. The zero value is
// ready to use.
type logGate struct {
	mu    sync.Mutex
	kinds map[string]*gatedKind
}

type gatedKind struct {
	last    time.Duration // when a line was let through, since the Limiter started
	skipped int64
}

// allow says whether a line of kind may be logged at now (time since the
// Limiter started), and how many were held back since the last one.
func (g *logGate) allow(kind string, now time.Duration) (ok bool, skipped int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.kinds == nil {
		g.kinds = make(map[string]*gatedKind)
	}
	k := g.kinds[kind]
	if k == nil {
		g.kinds[kind] = &gatedKind{last: now}
		return true, 0
	}
	if now-k.last < time.Minute {
		k.skipped++
		return false, 0
	}
	skipped = k.skipped
	k.last, k.skipped = now, 0
	return true, skipped
}
