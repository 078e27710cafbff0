package decision

import (
	"math"
	"time"

	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/redisscript/quota"
)

// Unit is a rate unit of Envoy's RateLimit message.
type Unit int

// Units, as Envoy numbers them.
const (
	UnitUnknown Unit = 0
	UnitSecond  Unit = 1
	UnitMinute  Unit = 2
	UnitHour    Unit = 3
	UnitDay     Unit = 4
	UnitMonth   Unit = 5
	UnitWeek    Unit = 7
)

// quotaUnits are the units of a quota's calendar periods.
var quotaUnits = map[quota.Period]Unit{quota.Hour: UnitHour, quota.Day: UnitDay, quota.Week: UnitWeek, quota.Month: UnitMonth}

// envoyLimitOfQuota is quota b's limit as Envoy says it: MaxPermits per
// its period (an Envoy week or month is a calendar one too, though in
// UTC: the reset Envoy is told comes from Redis, in the quota's zone).
func envoyLimitOfQuota(b *buckets.Bucket) EnvoyLimit {
	u, ok := quotaUnits[b.QuotaPeriod]
	if !ok || b.MaxPermits < 1 {
		return EnvoyLimit{}
	}
	return EnvoyLimit{RequestsPerUnit: uint32(min(b.MaxPermits, math.MaxUint32)), Unit: u, Multiplier: 1}
}

// EnvoyLimit is a bucket's rate as Envoy's RateLimit message carries it:
// RequestsPerUnit per Multiplier units.
type EnvoyLimit struct {
	RequestsPerUnit uint32
	Unit            Unit
	// Multiplier is 1 for a plain unit; 90 with UnitSecond is "per 90 s".
	Multiplier uint32
}

// units are Envoy's units, shortest first.
var units = []struct {
	unit    Unit
	seconds int64
}{{UnitSecond, 1}, {UnitMinute, 60}, {UnitHour, 3600}, {UnitDay, 86400}}

// envoyLimitOf expresses r exactly. It prefers a whole number of requests
// per plain unit (0.5/s is 30 per minute, 7/90s is 280 per hour), which
// every Envoy understands; otherwise the rate is scaled up to a whole
// number of requests and the period written with a unit multiplier. A
// rate too large for 32 bits is clamped, never rounded up.
func envoyLimitOf(r buckets.Rate) EnvoyLimit {
	const micro = 1_000_000
	pm, period := r.PermitsMicro, int64(r.Period/time.Second)
	if pm <= 0 || period <= 0 {
		return EnvoyLimit{}
	}
	for _, u := range units {
		// Requests per unit: pm * u.seconds / (period * micro), when whole.
		num, den := pm*u.seconds, period*micro
		if num%den == 0 && num/den <= math.MaxUint32 {
			return EnvoyLimit{RequestsPerUnit: uint32(num / den), Unit: u.unit, Multiplier: 1}
		}
	}
	// Smallest m with pm*m a whole number of permits.
	m := micro / gcd(pm, micro)
	requests, seconds := pm*m/micro, period*m
	unit, per := UnitSecond, int64(1)
	for _, u := range units[1:] {
		if seconds%u.seconds == 0 {
			unit, per = u.unit, u.seconds
		}
	}
	mult := seconds / per
	if requests > math.MaxUint32 || mult > math.MaxUint32 {
		// Not representable: say the same per second, rounded down.
		return EnvoyLimit{RequestsPerUnit: uint32(min(pm/micro/period, math.MaxUint32)), Unit: UnitSecond, Multiplier: 1}
	}
	return EnvoyLimit{RequestsPerUnit: uint32(requests), Unit: unit, Multiplier: uint32(mult)}
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
