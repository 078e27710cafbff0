// Package quota is the Go core of calendar quotas: N per calendar period
// (hour, day, week, month) in a named time zone, exact counts that reset
// at each period's start (docs/protocol.md, "Quotas").
//
// Lua in Redis has no time-zone database, and Redis's clock is the only
// clock a decision may use. So the period arithmetic happens here, in Go:
// Table lists the instants at which the periods of a zone start, from the
// period before the current one to well ahead, and the sync worker writes
// that table into the quota's hash. The script (lua/quota.lua) only finds
// the two entries around Redis's TIME: the period containing now and its
// end. Counts are kept with the start of the period they belong to, so a
// count of an earlier period reads as zero: the reset is exact, at the
// instant of the table, whatever the time zone does.
//
// Take and Find are the decision and the lookup the script makes,
// operation for operation, for client/memlimit and the client's failure
// policy. Times are Unix seconds for boundaries and microseconds for
// "now", as in the scripts.
package quota

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/internal/redisscript/tokens"
)

// Period is the calendar period of a quota. The zero Period is invalid.
type Period string

// The periods. A week starts on Monday at 00:00 (ISO 8601); a day at
// 00:00; a month on its first day at 00:00; an hour at minute 0. Where a
// time-zone change skips the local start (a day starting at a midnight
// that does not exist), the period starts at the first instant of it.
const (
	Hour  Period = "hour"
	Day   Period = "day"
	Week  Period = "week"
	Month Period = "month"
)

// Periods lists the periods, shortest first.
var Periods = []Period{Hour, Day, Week, Month}

// ErrInvalid is wrapped by the errors of this package's parsers.
var ErrInvalid = errors.New("invalid quota")

// ParsePeriod returns the period named s.
func ParsePeriod(s string) (Period, error) {
	p := Period(s)
	if !p.Valid() {
		return "", fmt.Errorf("%w: period %q must be hour, day, week or month", ErrInvalid, s)
	}
	return p, nil
}

// Valid reports whether p is one of the periods.
func (p Period) Valid() bool { return p == Hour || p == Day || p == Week || p == Month }

// Nominal is a typical length of the period (a month as 30 days), for
// texts and rough rates only: boundaries come from Start and Next.
func (p Period) Nominal() time.Duration {
	switch p {
	case Hour:
		return time.Hour
	case Day:
		return 24 * time.Hour
	case Week:
		return 7 * 24 * time.Hour
	case Month:
		return 30 * 24 * time.Hour
	}
	return 0
}

// LoadZone returns the location of an IANA time zone name ("UTC",
// "Europe/Berlin"). The empty name and "Local" are refused: a quota's
// boundaries must not depend on the machine that computes them.
func LoadZone(name string) (*time.Location, error) {
	if name == "" || name == "Local" || len(name) > 64 {
		return nil, fmt.Errorf("%w: time zone %q is not an IANA time zone name", ErrInvalid, name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("%w: time zone %q is not an IANA time zone name", ErrInvalid, name)
	}
	return loc, nil
}

// Start returns the start of the period of p containing t, in loc.
func (p Period) Start(t time.Time, loc *time.Location) time.Time {
	l := t.In(loc)
	y, m, d := l.Date()
	switch p {
	case Hour:
		// An hour starts at minute 0 of local time; an offset that is
		// not a whole number of hours moves that instant, not the rule.
		s := l.Add(-time.Duration(l.Minute())*time.Minute - time.Duration(l.Second())*time.Second -
			time.Duration(l.Nanosecond()))
		return s.In(loc)
	case Day:
		return dayStart(y, m, d, loc)
	case Week:
		back := (int(l.Weekday()) + 6) % 7 // days since Monday
		return dayStart(y, m, d-back, loc)
	case Month:
		return dayStart(y, m, 1, loc)
	}
	return time.Time{}
}

// Next returns the start of the period after the one starting at start
// (a value Start returned).
func (p Period) Next(start time.Time, loc *time.Location) time.Time {
	l := start.In(loc)
	y, m, d := l.Date()
	switch p {
	case Hour:
		// The next local minute 0 after start: an hour later, unless a
		// change of offset by a part of an hour moved the minute.
		n := start.Add(time.Hour)
		return p.Start(n, loc)
	case Day:
		return dayStart(y, m, d+1, loc)
	case Week:
		return dayStart(y, m, d+7, loc)
	case Month:
		return dayStart(y, m+1, 1, loc)
	}
	return time.Time{}
}

// dayStart is the first instant of the local date y-m-d (normalised) in
// loc: local midnight, or, where a change of offset skips midnight, the
// instant of the change; where midnight happens twice, the first.
func dayStart(y int, m time.Month, d int, loc *time.Location) time.Time {
	c := time.Date(y, m, d, 0, 0, 0, 0, loc)
	want := time.Date(y, m, d, 0, 0, 0, 0, time.UTC) // the date, normalised
	wy, wm, wd := want.Date()
	if cy, cm, cd := c.Date(); cy != wy || cm != wm || cd != wd {
		// Date picked the offset after a change that skipped midnight, so
		// c is still on the day before: the day starts at the change.
		_, end := c.ZoneBounds()
		if !end.IsZero() {
			c = end
		}
		return c
	}
	// Midnight happens twice when the offset goes back over it: the
	// earlier one, in the offset before the change, starts the day.
	if start, _ := c.ZoneBounds(); !start.IsZero() && c.Sub(start) < 24*time.Hour {
		before := start.Add(-time.Nanosecond)
		_, offBefore := before.Zone()
		_, offNow := c.Zone()
		if offBefore > offNow {
			e := c.Add(-time.Duration(offBefore-offNow) * time.Second)
			if e.Before(start) {
				if ey, em, ed := e.In(loc).Date(); ey == wy && em == wm && ed == wd {
					return e
				}
			}
		}
	}
	return c
}

// The size of a table (see Table).
const (
	// Ahead is how long past the time it was computed for a table
	// reaches at least: the sync worker must write a new table within
	// it, or the script refuses the quota (as an unknown bucket).
	Ahead = 48 * time.Hour
	// MinAhead is the fewest boundaries after the time a table was
	// computed for.
	MinAhead = 4
	// MaxEntries is the most entries a table may hold (an hourly quota
	// needs 51: the previous and the current period's starts and 49
	// ahead).
	MaxEntries = 64
	// Width is the characters of one entry in the encoded table: Unix
	// seconds in 10 digits, which holds every instant from 2001-09-09 to
	// 2286-11-20.
	Width = 10
	// MinBoundary and MaxBoundary are the instants a table can hold.
	MinBoundary = 1_000_000_000
	MaxBoundary = 9_999_999_999
)

// Table returns the boundaries (Unix seconds, ascending) of p in loc
// around t: the start of the period before the one containing t, that
// of the current period, and the following starts up to at least Ahead
// and MinAhead boundaries past t. Redis's clock may differ from the
// computing machine's by some time either way: the period before covers
// a clock behind, Ahead one ahead.
func Table(p Period, loc *time.Location, t time.Time) []int64 {
	cur := p.Start(t, loc)
	prev := p.Start(cur.Add(-time.Second), loc)
	out := []int64{prev.Unix(), cur.Unix()}
	past := 0
	for s := cur; ; {
		s = p.Next(s, loc)
		out = append(out, s.Unix())
		past++
		if past >= MinAhead && s.Sub(t) >= Ahead {
			return out
		}
	}
}

// Encode writes a table as the script reads it: each boundary in Width
// digits, nothing between them.
func Encode(b []int64) (string, error) {
	if err := check(b); err != nil {
		return "", err
	}
	buf := make([]byte, 0, len(b)*Width)
	for _, v := range b {
		buf = strconv.AppendInt(buf, v, 10)
	}
	return string(buf), nil
}

// Decode reads an encoded table.
func Decode(s string) ([]int64, error) {
	if len(s)%Width != 0 {
		return nil, fmt.Errorf("%w: table of %d characters", ErrInvalid, len(s))
	}
	b := make([]int64, 0, len(s)/Width)
	for i := 0; i < len(s); i += Width {
		v, err := strconv.ParseInt(s[i:i+Width], 10, 64)
		if err != nil || s[i] < '1' || s[i] > '9' {
			return nil, fmt.Errorf("%w: table entry %q", ErrInvalid, s[i:i+Width])
		}
		b = append(b, v)
	}
	return b, check(b)
}

// check reports whether b is a table: 2..MaxEntries strictly increasing
// boundaries of Width digits.
func check(b []int64) error {
	if len(b) < 2 || len(b) > MaxEntries {
		return fmt.Errorf("%w: a table has 2 to %d boundaries, not %d", ErrInvalid, MaxEntries, len(b))
	}
	for i, v := range b {
		if v < MinBoundary || v > MaxBoundary {
			return fmt.Errorf("%w: boundary %d out of range", ErrInvalid, v)
		}
		if i > 0 && v <= b[i-1] {
			return fmt.Errorf("%w: boundaries must increase (%d after %d)", ErrInvalid, v, b[i-1])
		}
	}
	return nil
}

// Find returns the period of the table b containing now (µs): its start
// and end in Unix seconds, and false when b does not cover now (b[0] <=
// now < b[len-1] in µs), as the script finds it by bisection.
func Find(b []int64, now int64) (start, end int64, ok bool) {
	k := len(b)
	if k < 2 || now < b[0]*1_000_000 || now >= b[k-1]*1_000_000 {
		return 0, 0, false
	}
	lo, hi := 0, k-1
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if b[mid]*1_000_000 <= now {
			lo = mid
		} else {
			hi = mid
		}
	}
	return b[lo], b[hi], true
}

// Take decides a request of n (1 <= n <= q) from a quota of q per period,
// in a period that ends at end (µs) and has counted used, at now (µs): the
// new count and true when granted (used + n <= q). Otherwise nothing is
// counted and the answer is Denied, or WouldDeny in shadow mode. A grant
// or a denial answers the whole requests left this period (never below 0)
// and, as reset, the time until the period ends; a denial waits for that
// too (n <= q fits a fresh period). used is the count of this period: a
// count of another period is 0.
func Take(q, used, n, end, now int64, shadow bool) (int64, bool, tokens.Answer) {
	reset := tokens.Micros(float64(end - now))
	if used+n <= q {
		used += n
		return used, true, tokens.Answer{Code: tokens.Allowed, Remaining: q - used, ResetMicros: reset}
	}
	a := tokens.Answer{Code: tokens.Denied, Remaining: max(0, q-used), RetryMicros: reset, ResetMicros: reset}
	if shadow {
		a.Code = tokens.WouldDeny
	}
	return used, false, a
}
