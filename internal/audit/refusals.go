package audit

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/sluicehq/sluice/internal/periodic"
)

// Sampling of refusals of callers who are not signed in. Anyone can send
// such requests by the thousand, so each is counted but only a sample is
// written: at most DefaultSample rows per DefaultInterval, and one row per
// interval that says how many more there were.
const (
	DefaultSample   = 20
	DefaultInterval = time.Minute
)

// Counter counts events; a Prometheus counter is one.
type Counter interface{ Inc() }

// Refusals records refused requests of callers who are not signed in,
// bounded: every one is counted (Counter and Total), and of each Interval
// at most Sample are written to the log, plus one summary row when more
// were refused. Refusals of signed-in users are few and belong to someone:
// write those with Write, one row each. A Refusals is safe for concurrent
// use; set its fields before the first call.
type Refusals struct {
	db sqlx.ExecerContext

	// Sample and Interval bound the rows written: DefaultSample and
	// DefaultInterval when zero.
	Sample   int
	Interval time.Duration
	// Counter, if set, counts every refusal (for metrics).
	Counter Counter
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	mu      sync.Mutex
	start   time.Time // of the current interval
	written int       // rows written in the current interval
	skipped int64     // refusals not written in the current interval
	total   int64
}

// NewRefusals returns a Refusals writing through db.
func NewRefusals(db sqlx.ExecerContext) *Refusals { return &Refusals{db: db} }

func (r *Refusals) now() time.Time {
	if r.Now != nil {
		return r.Now().UTC()
	}
	return time.Now().UTC()
}

func (r *Refusals) limits() (int, time.Duration) {
	n, d := r.Sample, r.Interval
	if n <= 0 {
		n = DefaultSample
	}
	if d <= 0 {
		d = DefaultInterval
	}
	return n, d
}

// summary is the row that stands for the refusals of an interval that were
// counted but not written.
type summary struct {
	from, to time.Time
	skipped  int64
}

// rollover starts a new interval if the current one is over, returning the
// summary of the one that ended, if any refusal went unwritten. r.mu is held.
func (r *Refusals) rollover(now time.Time, every time.Duration) *summary {
	if !r.start.IsZero() && now.Sub(r.start) < every {
		return nil
	}
	var s *summary
	if r.skipped > 0 {
		s = &summary{from: r.start, to: now, skipped: r.skipped}
	}
	r.start, r.written, r.skipped = now, 0, 0
	return s
}

// Record counts one refused request of a caller who is not signed in and
// writes it (action "access.denied") if the interval's sample has room.
func (r *Refusals) Record(ctx context.Context, actor Actor, e Entry) error {
	if r.Counter != nil {
		r.Counter.Inc()
	}
	sample, every := r.limits()
	now := r.now()
	r.mu.Lock()
	r.total++
	s := r.rollover(now, every)
	write := r.written < sample
	if write {
		r.written++
	} else {
		r.skipped++
	}
	r.mu.Unlock()
	var err error
	if s != nil {
		err = r.writeSummary(ctx, actor.Via, *s)
	}
	if write {
		if e.Action == "" {
			e.Action = "access.denied"
		}
		if e.At.IsZero() {
			e.At = now
		}
		if werr := Write(ctx, r.db, actor, e); werr != nil {
			err = werr
		}
	}
	return err
}

// Flush writes the summary of the current interval if it is over, so that
// a burst followed by silence is still accounted for. Call it now and then
// (Run does it every Interval).
func (r *Refusals) Flush(ctx context.Context) error {
	_, every := r.limits()
	now := r.now()
	r.mu.Lock()
	var s *summary
	if !r.start.IsZero() && now.Sub(r.start) >= every {
		s = r.rollover(now, every)
		r.start = time.Time{} // the next refusal starts a fresh interval
	}
	r.mu.Unlock()
	if s == nil {
		return nil
	}
	return r.writeSummary(ctx, "", *s)
}

// Run flushes every Interval until ctx ends.
func (r *Refusals) Run(ctx context.Context) {
	_, every := r.limits()
	periodic.Every(ctx, every, func(ctx context.Context) { _ = r.Flush(ctx) })
}

// Total returns how many refusals were recorded, written or not.
func (r *Refusals) Total() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.total
}

func (r *Refusals) writeSummary(ctx context.Context, via string, s summary) error {
	return Write(ctx, r.db, Actor{User: "anonymous", Via: via}, Entry{
		At: s.to, Action: "access.denied", ObjectType: "route",
		Detail: fmt.Sprintf("%d more refused requests without sign-in from %s to %s were counted but not logged one by one",
			s.skipped, s.from.Format(time.RFC3339), s.to.Format(time.RFC3339)),
	})
}
