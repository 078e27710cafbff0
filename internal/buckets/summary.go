package buckets

import (
	"math/big"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/internal/redisscript/quota"
)

// Summary says in plain words what a capacity and rate allow: "bursts of
// up to 10, then 5 per second: 300 per minute sustained". The sustained
// figure is the rate over the next larger unit than its period (minute,
// hour, day, week, year), exact to 6 decimals. The bucket form shows it
// as you type: web/static/app.js computes the same text, and a test
// checks that both agree. An invalid capacity or rate gives "".
func Summary(capacity int64, r Rate) string {
	if capacity < 1 || capacity > MaxCapacity || r.Validate() != nil {
		return ""
	}
	unitSecs, unitName := sustainedUnit(r.PeriodSeconds())
	// permits per unit, in millionths, rounded half up: exact in big ints
	// (permits up to 10^15 millionths times a year of seconds).
	n := new(big.Int).Mul(big.NewInt(r.PermitsMicro), big.NewInt(unitSecs))
	p := big.NewInt(r.PeriodSeconds())
	n.Mul(n, big.NewInt(2)).Add(n, p)
	n.Quo(n, new(big.Int).Mul(p, big.NewInt(2)))
	return "bursts of up to " + groupDigits(strconv.FormatInt(capacity, 10)) + ", then " + r.Human() +
		": " + microDecimal(n) + " per " + unitName + " sustained"
}

// sustainedUnit is the unit a Summary states the sustained rate in: the
// next larger one than a period of secs seconds.
func sustainedUnit(secs int64) (int64, string) {
	switch {
	case secs < 60:
		return 60, "minute"
	case secs < 3600:
		return 3600, "hour"
	case secs < 86400:
		return 86400, "day"
	case secs < 7*86400:
		return 7 * 86400, "week"
	}
	return 365 * 86400, "year"
}

// microDecimal formats millionths as a decimal with thousands separators
// and no trailing zeros: 300000000 -> "300", 1500000 -> "1.5".
func microDecimal(n *big.Int) string {
	whole, frac := new(big.Int).QuoRem(n, big.NewInt(micro), new(big.Int))
	s := groupDigits(whole.String())
	if frac.Sign() != 0 {
		f := strings.TrimRight(leftPad(frac.String(), 6), "0")
		s += "." + f
	}
	return s
}

func leftPad(s string, n int) string {
	if len(s) >= n {
		return s
	}
	return strings.Repeat("0", n-len(s)) + s
}

// groupDigits puts a comma between groups of three digits: "1234567" ->
// "1,234,567".
func groupDigits(s string) string {
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// QuotaSummary says a quota of n per period p in zone in words ("10,000
// per month, resets on the 1st at 00:00 Europe/Berlin"), or "" when they
// are not a valid quota. An empty zone is UTC, as Validate makes it.
func QuotaSummary(n int64, p quota.Period, zone string) string {
	if zone = strings.TrimSpace(zone); zone == "" {
		zone = "UTC"
	}
	if n < 1 || n > MaxCapacity || !p.Valid() {
		return ""
	}
	if _, err := quota.LoadZone(zone); err != nil {
		return ""
	}
	var when string
	switch p {
	case quota.Hour:
		when = "every hour at minute 0"
	case quota.Day:
		when = "every day at 00:00"
	case quota.Week:
		when = "on Mondays at 00:00"
	default:
		when = "on the 1st at 00:00"
	}
	return groupDigits(strconv.FormatInt(n, 10)) + " per " + string(p) + ", resets " + when + " " + zone
}
