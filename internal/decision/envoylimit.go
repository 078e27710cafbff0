package decision

import (
	"math"
	"time"

	"github.com/sluicehq/sluice/internal/buckets"
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
)

// EnvoyLimit is a bucket's rate as Envoy's RateLimit message carries it:
// RequestsPerUnit per Multiplier units.
type EnvoyLimit struct {
	RequestsPerUnit uint32
	Unit            Unit
	// Multiplier is 1 for a plain unit; 90 with UnitSecond is "per 90 s".
	Multiplier uint32
}

// envoyLimitOf expresses r exactly when it can: the rate is scaled up to a
// whole number of requests (0.5/s is 30 per minute), then the period is
// put in the largest unit dividing it. A rate too large for 32 bits is
// clamped, never rounded up.
func envoyLimitOf(r buckets.Rate) EnvoyLimit {
	const micro = 1_000_000
	pm, period := r.PermitsMicro, int64(r.Period/time.Second)
	if pm <= 0 || period <= 0 {
		return EnvoyLimit{}
	}
	// Smallest m with pm*m a whole number of permits.
	m := micro / gcd(pm, micro)
	requests, seconds := pm*m/micro, period*m
	unit, per := UnitSecond, int64(1)
	for _, u := range []struct {
		unit    Unit
		seconds int64
	}{{UnitDay, 86400}, {UnitHour, 3600}, {UnitMinute, 60}} {
		if seconds%u.seconds == 0 {
			unit, per = u.unit, u.seconds
			break
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
