package decision

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// logInterval is how often one kind of event may be logged: callers decide
// how often some errors happen (an end user chooses a key a gateway sends),
// and a line per request would let them flood the log.
const logInterval = time.Minute

// Kinds of events logged at most once per logInterval.
const (
	logRefusedInvalid = "refused_invalid"
	logRefusedOther   = "refused"
	logMisconfigured  = "mapping_unserved"
	logInternal       = "internal_error"
)

// logEvery logs each kind of event at most once per logInterval; the lines
// left out are counted (sluice_decide_log_suppressed_total) and their
// number is given on the next line of the kind.
type logEvery struct {
	log     *slog.Logger
	metrics *Metrics
	now     func() time.Time
	mu      sync.Mutex
	kinds   map[string]*logKind // one entry per kind constant: bounded
}

type logKind struct {
	last    time.Time
	skipped int64
}

// emit logs msg at level unless a line of kind was logged in the last
// logInterval.
func (l *logEvery) emit(level slog.Level, kind, msg string, args ...any) {
	now := l.now()
	l.mu.Lock()
	k := l.kinds[kind]
	if k == nil {
		k = &logKind{}
		l.kinds[kind] = k
	}
	if !k.last.IsZero() && now.Sub(k.last) < logInterval {
		k.skipped++
		l.mu.Unlock()
		l.metrics.logSuppressed(kind)
		return
	}
	skipped := k.skipped
	k.last, k.skipped = now, 0
	l.mu.Unlock()
	if skipped > 0 {
		args = append(args, "suppressed_since_last", skipped)
	}
	l.log.Log(context.Background(), level, msg+" (logged at most once a minute)", append(args, "kind", kind)...)
}
