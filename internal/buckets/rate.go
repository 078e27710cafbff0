package buckets

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/redisscript/limits"
)

// tooManyPermits says what a rate's permits may not exceed.
var tooManyPermits = fmt.Sprintf("permits must be at most %d per period", limits.MaxPermits)

// Limits of a Rate.
const (
	// MaxPermitsMicro is the most permits per period, in millionths.
	MaxPermitsMicro = limits.MaxPermitsMicro
	// MinPeriod and MaxPeriod bound a rate's period.
	MinPeriod = time.Second
	MaxPeriod = 365 * 24 * time.Hour
)

const micro = limits.PermitsScale

// Rate is a refill rate: permits per period. Permits are kept in millionths
// so that rates like 0.5/s or 7/90s are exact; the period is a whole number
// of seconds.
//
// The text form, accepted by ParseRate and produced by String, is
// "<permits>/<period>" or "<permits> per <period>", where permits is a
// decimal with at most 6 decimals and period is a unit (s, sec, second,
// m, min, minute, h, hr, hour, d, day, and their plurals) optionally
// preceded by a whole count: "0.5/s", "100/min", "10000/day", "7 per 90s",
// "3 per 2 hours". The zero Rate is not valid.
type Rate struct {
	// PermitsMicro is the number of permits per period times 10^6.
	PermitsMicro int64
	// Period is a whole number of seconds.
	Period time.Duration
}

type unit struct {
	seconds int64
	short   string // canonical suffix: "s", "min", "h", "day"
	human   string // singular English name
}

var (
	second = unit{1, "s", "second"}
	minute = unit{60, "min", "minute"}
	hour   = unit{3600, "h", "hour"}
	day    = unit{86400, "day", "day"}
)

var units = map[string]unit{
	"s": second, "sec": second, "secs": second, "second": second, "seconds": second,
	"m": minute, "min": minute, "mins": minute, "minute": minute, "minutes": minute,
	"h": hour, "hr": hour, "hrs": hour, "hour": hour, "hours": hour,
	"d": day, "day": day, "days": day,
}

const rateSyntax = `must look like "100/min", "0.5/s", "10000/day" or "7 per 90s"`

func rateError(reason string) error { return errs.Invalid("rate", reason) }

// ParseRate parses s (see Rate for the syntax), ignoring case and
// surrounding space. Errors are *errs.Validation on the field "rate".
func ParseRate(s string) (Rate, error) {
	s = strings.ToLower(strings.Join(strings.Fields(s), " "))
	if s == "" {
		return Rate{}, rateError("is required")
	}
	if len(s) > 100 {
		return Rate{}, rateError(rateSyntax)
	}
	left, right, ok := strings.Cut(s, "/")
	if !ok {
		left, right, ok = strings.Cut(s, " per ")
	}
	if !ok {
		return Rate{}, rateError(rateSyntax)
	}
	permits, err := parsePermits(strings.TrimSpace(left))
	if err != nil {
		return Rate{}, err
	}
	period, err := parsePeriod(strings.TrimSpace(right))
	if err != nil {
		return Rate{}, err
	}
	r := Rate{PermitsMicro: permits, Period: period}
	if err := r.Validate(); err != nil {
		return Rate{}, err
	}
	return r, nil
}

// parsePermits reads a non-negative decimal into millionths, exactly.
func parsePermits(s string) (int64, error) {
	whole, frac, _ := strings.Cut(s, ".")
	frac = strings.TrimRight(frac, "0")
	if s == "" || s == "." {
		return 0, rateError(rateSyntax)
	}
	if !digits(whole) || !digits(frac) {
		return 0, rateError(rateSyntax)
	}
	if len(frac) > 6 {
		return 0, rateError("permits may have at most 6 decimals")
	}
	whole = strings.TrimLeft(whole, "0")
	if len(whole) > 10 {
		return 0, rateError(tooManyPermits)
	}
	var w int64
	if whole != "" {
		w, _ = strconv.ParseInt(whole, 10, 64)
	}
	f := int64(0)
	if frac != "" {
		f, _ = strconv.ParseInt(frac+strings.Repeat("0", 6-len(frac)), 10, 64)
	}
	return w*micro + f, nil
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// parsePeriod reads "[count][ ]unit".
func parsePeriod(s string) (time.Duration, error) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	countText, name := s[:i], strings.TrimSpace(s[i:])
	u, ok := units[name]
	if !ok {
		return 0, rateError(`period must be a unit (s, min, h, day) or a count and a unit ("90s", "2 hours")`)
	}
	count := int64(1)
	if countText != "" {
		countText = strings.TrimLeft(countText, "0")
		if countText == "" || len(countText) > 9 {
			return 0, rateError("period must be between 1 second and 365 days")
		}
		count, _ = strconv.ParseInt(countText, 10, 64)
	}
	secs := count * u.seconds // at most 10^9 x 86400: no overflow
	if secs > int64(MaxPeriod/time.Second) {
		return 0, rateError("period must be between 1 second and 365 days")
	}
	return time.Duration(secs) * time.Second, nil
}

// Validate checks the bounds of r: more than 0 and at most 10^9 permits per
// period of 1 second to 365 days in whole seconds. The error is a
// *errs.Validation on the field "rate".
func (r Rate) Validate() error {
	switch {
	case r.PermitsMicro == 0 && r.Period == 0:
		return rateError("is required")
	case r.PermitsMicro <= 0:
		return rateError("permits must be greater than 0")
	case r.PermitsMicro > MaxPermitsMicro:
		return rateError(tooManyPermits)
	case r.Period < MinPeriod || r.Period > MaxPeriod || r.Period%time.Second != 0:
		return rateError("period must be between 1 second and 365 days")
	}
	return nil
}

// IsZero reports whether r is the zero Rate (no rate set).
func (r Rate) IsZero() bool { return r == Rate{} }

// Permits returns the permits per period as a canonical decimal: "0.5",
// "100", "1.000001".
func (r Rate) Permits() string {
	n := r.PermitsMicro
	sign := ""
	if n < 0 {
		sign, n = "-", -n // only invalid rates; keeps String total
	}
	whole, frac := n/micro, n%micro
	if frac == 0 {
		return sign + strconv.FormatInt(whole, 10)
	}
	return sign + strconv.FormatInt(whole, 10) + "." + strings.TrimRight(fmt.Sprintf("%06d", frac), "0")
}

// PeriodSeconds returns the period in whole seconds.
func (r Rate) PeriodSeconds() int64 { return int64(r.Period / time.Second) }

// periodUnit splits the period into the largest unit that divides it and
// the count of that unit.
func (r Rate) periodUnit() (int64, unit) {
	secs := r.PeriodSeconds()
	for _, u := range []unit{day, hour, minute} {
		if secs >= u.seconds && secs%u.seconds == 0 {
			return secs / u.seconds, u
		}
	}
	return secs, second
}

// String returns the canonical form: "0.5/s", "100/min", "5/h",
// "10000/day", "7/90s", "3/2h", "1/2day". ParseRate(r.String()) == r for
// every valid r. The zero Rate gives "".
func (r Rate) String() string {
	if r.IsZero() {
		return ""
	}
	n, u := r.periodUnit()
	if n == 1 {
		return r.Permits() + "/" + u.short
	}
	return r.Permits() + "/" + strconv.FormatInt(n, 10) + u.short
}

// Human returns r in words for people: "0.5 per second", "100 per minute",
// "7 per 90 seconds", "3 per 2 hours".
func (r Rate) Human() string {
	if r.IsZero() {
		return ""
	}
	n, u := r.periodUnit()
	if n == 1 {
		return r.Permits() + " per " + u.human
	}
	return r.Permits() + " per " + strconv.FormatInt(n, 10) + " " + u.human + "s"
}

// PerSecond returns the rate in permits per second (approximate; use
// PermitsMicro and Period for exact arithmetic).
func (r Rate) PerSecond() float64 {
	if r.Period <= 0 {
		return 0
	}
	return float64(r.PermitsMicro) / micro / r.Period.Seconds()
}

// ParseOptionalRate is ParseRate, except that empty text (or spaces) is
// the zero Rate: the rate of the kinds that do not refill. Whether a rate
// is needed is the Bucket's rule (Validate), not the parser's.
func ParseOptionalRate(s string) (Rate, error) {
	if strings.TrimSpace(s) == "" {
		return Rate{}, nil
	}
	return ParseRate(s)
}

// MarshalText encodes r as its canonical String, so JSON carries "0.5/s".
func (r Rate) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText parses text with ParseRate.
func (r *Rate) UnmarshalText(text []byte) error {
	parsed, err := ParseRate(string(text))
	if err != nil {
		return err
	}
	*r = parsed
	return nil
}
