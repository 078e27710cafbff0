package redisscript

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/internal/redisscript/limits"
	"github.com/sluicehq/sluice/internal/redisscript/quota"
)

// Limits of a Config, checked by Validate and so by Apply.
const (
	// MaxCapacity is the largest capacity.
	MaxCapacity = limits.MaxCapacity
	// MaxPermitsMicro is the most permits per period, in millionths.
	MaxPermitsMicro = limits.MaxPermitsMicro
	// MaxPeriodSeconds is the longest period, a year.
	MaxPeriodSeconds = 365 * 24 * 3600
	// MaxID is the largest id and version, 2^53-1: larger integers are not
	// exact as Lua numbers, so the scripts refuse them.
	MaxID = 1<<53 - 1
	// MinLeaseMillis and MaxLeaseMillis bound the lease time of a bucket
	// in lease mode.
	MinLeaseMillis = 10
	MaxLeaseMillis = 10_000
)

// ErrInvalidConfig is wrapped by the errors of Validate and ParsePermits.
var ErrInvalidConfig = errors.New("invalid bucket config")

// Config is the config part of a bucket hash, as the sync worker writes it.
type Config struct {
	// Name is the bucket name; it picks the keys.
	Name string
	// ID is the MySQL id of the bucket; a recreated bucket gets a larger one.
	ID int64
	// Version is the MySQL row version, increasing for one ID.
	Version int64
	// Capacity is the most tokens the bucket holds (1..1e9).
	Capacity int64
	// PermitsMicro is the permits added per period times 10^6, so that
	// fractional rates such as 0.5 per second are exact.
	PermitsMicro int64
	// PeriodSeconds is the refill period in whole seconds.
	PeriodSeconds int64
	// Apps are the apps allowed to take tokens.
	Apps []string
	// LeaseMillis is how long a client may hand out leased tokens of the
	// bucket, in milliseconds; 0 turns lease mode off.
	LeaseMillis int64
	// Shadow puts the bucket in shadow mode: where it would deny, the
	// acquire script answers WouldDeny and takes nothing.
	Shadow bool
	// Kind is the kind of limit: KindBucket (also ""), KindConcurrency or
	// KindQuota. Only a bucket refills: the others have PermitsMicro and
	// PeriodSeconds 0 and no lease.
	Kind string
	// Bounds is a quota's table: the instants (Unix seconds, ascending) at
	// which its periods start, from package quota's Table; empty for the
	// other kinds. A quota without one answers as an unknown bucket.
	Bounds []int64
	// SlotMillis is a concurrency limit's slot lease time, in milliseconds
	// (MinSlotMillis..MaxSlotMillis): a slot neither released nor renewed
	// expires that long after it was taken or renewed. 0 for the other
	// kinds.
	SlotMillis int64
	// Reserve is the tokens kept for requests marked critical: any other
	// request is refused when taking its tokens would leave fewer. 0 (none)
	// to Capacity - 1; only a token bucket has one. The reserve of an
	// override's keys is the bucket's share of the override's capacity
	// (tokens.ScaleReserve).
	Reserve int64
	// DecimalState keeps the bucket's state in the decimal fields tokens
	// and ts, which clients of releases before the binary state read and
	// write, instead of the binary field st (docs/protocol.md, "The bucket
	// state"): for a rolling upgrade from such a release, until its last
	// client is gone. Only Apply reads it; the scripts write a state back
	// in the form they found.
	DecimalState bool
}

// The kinds of a Config, as the kind field holds them.
const (
	KindBucket      = "bucket"
	KindConcurrency = "concurrency"
	KindQuota       = "quota"
)

// LimitKind is c's kind, KindBucket when empty.
func (c Config) LimitKind() string {
	if c.Kind == "" {
		return KindBucket
	}
	return c.Kind
}

// Validate reports whether c can be written to Redis.
func (c Config) Validate() error {
	switch {
	case !ValidName(c.Name):
		return fmt.Errorf("%w: bucket name %q", ErrInvalidConfig, c.Name)
	case c.ID < 1 || c.ID > MaxID:
		return fmt.Errorf("%w: id %d must be between 1 and %d", ErrInvalidConfig, c.ID, int64(MaxID))
	case c.Version < 0 || c.Version > MaxID:
		return fmt.Errorf("%w: version %d must be between 0 and %d", ErrInvalidConfig, c.Version, int64(MaxID))
	case c.Capacity < 1 || c.Capacity > MaxCapacity:
		return fmt.Errorf("%w: capacity %d must be between 1 and %d", ErrInvalidConfig, c.Capacity, MaxCapacity)
	case c.LimitKind() != KindBucket && c.LimitKind() != KindConcurrency && c.LimitKind() != KindQuota:
		return fmt.Errorf("%w: kind %q", ErrInvalidConfig, c.Kind)
	case c.LimitKind() != KindBucket && (c.PermitsMicro != 0 || c.PeriodSeconds != 0 || c.LeaseMillis != 0):
		return fmt.Errorf("%w: a %s limit has no rate and no lease", ErrInvalidConfig, c.Kind)
	case c.LimitKind() == KindBucket && (c.PermitsMicro < 1 || c.PermitsMicro > MaxPermitsMicro):
		return fmt.Errorf("%w: permits must be between 0.000001 and %d", ErrInvalidConfig, limits.MaxPermits)
	case c.LimitKind() == KindBucket && (c.PeriodSeconds < 1 || c.PeriodSeconds > MaxPeriodSeconds):
		return fmt.Errorf("%w: period %d s must be between 1 and %d", ErrInvalidConfig, c.PeriodSeconds, MaxPeriodSeconds)
	case c.LimitKind() == KindConcurrency && (c.SlotMillis < MinSlotMillis || c.SlotMillis > MaxSlotMillis):
		return fmt.Errorf("%w: slot lease time %d ms must be between %d and %d", ErrInvalidConfig, c.SlotMillis,
			MinSlotMillis, MaxSlotMillis)
	case c.LimitKind() != KindConcurrency && c.SlotMillis != 0:
		return fmt.Errorf("%w: only a concurrency limit has a slot lease time", ErrInvalidConfig)
	case c.LeaseMillis != 0 && (c.LeaseMillis < MinLeaseMillis || c.LeaseMillis > MaxLeaseMillis):
		return fmt.Errorf("%w: lease %d ms must be 0 (off) or between %d and %d", ErrInvalidConfig, c.LeaseMillis,
			MinLeaseMillis, MaxLeaseMillis)
	case c.Reserve < 0 || c.Reserve >= c.Capacity:
		return fmt.Errorf("%w: reserve %d must be between 0 and the capacity less one, %d", ErrInvalidConfig, c.Reserve,
			c.Capacity-1)
	case c.Reserve != 0 && c.LimitKind() != KindBucket:
		return fmt.Errorf("%w: only a token bucket has a reserve", ErrInvalidConfig)
	case len(c.Apps) == 0:
		return fmt.Errorf("%w: at least one allowed app is needed", ErrInvalidConfig)
	case c.LimitKind() != KindQuota && len(c.Bounds) > 0:
		return fmt.Errorf("%w: only a quota has period boundaries", ErrInvalidConfig)
	case c.LimitKind() == KindQuota && len(c.Bounds) > 0:
		// A quota without a table is written, and answers as an unknown
		// bucket until a table covers Redis's clock.
		if _, err := quota.Encode(c.Bounds); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
	}
	for _, a := range c.Apps {
		if !ValidName(a) {
			return fmt.Errorf("%w: app name %q", ErrInvalidConfig, a)
		}
	}
	return nil
}

// FormatPermits formats permits in millionths as the canonical decimal
// string of the permits field: no exponent, no trailing zeros ("0.5",
// "100", "1.000001").
func FormatPermits(micro int64) string {
	neg := micro < 0
	u := uint64(micro)
	if neg {
		u = -u
	}
	whole, frac := u/1_000_000, u%1_000_000
	s := strconv.FormatUint(whole, 10)
	if frac != 0 {
		f := strconv.FormatUint(frac+1_000_000, 10)[1:] // six digits, zero padded
		s += "." + strings.TrimRight(f, "0")
	}
	if neg {
		s = "-" + s
	}
	return s
}

// ParsePermits parses a decimal permits string ("0.5", "100", at most 6
// decimals, no sign or exponent) into millionths.
func ParsePermits(s string) (int64, error) {
	whole, frac, dot := strings.Cut(s, ".")
	if whole == "" || len(whole) > 10 || (dot && (frac == "" || len(frac) > 6)) {
		return 0, fmt.Errorf("%w: permits %q", ErrInvalidConfig, s)
	}
	var v int64
	for i := 0; i < len(whole); i++ {
		c := whole[i]
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%w: permits %q", ErrInvalidConfig, s)
		}
		v = v*10 + int64(c-'0')
	}
	v *= 1_000_000
	scale := int64(100_000)
	for i := 0; i < len(frac); i++ {
		c := frac[i]
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%w: permits %q", ErrInvalidConfig, s)
		}
		v += int64(c-'0') * scale
		scale /= 10
	}
	return v, nil
}

// joinApps gives the apps field: ",a,b,", so that an exact match is a
// plain search for ",app,".
func joinApps(apps []string) string {
	return "," + strings.Join(apps, ",") + ","
}

// splitApps parses the apps field.
func splitApps(s string) []string {
	s = strings.Trim(s, ",")
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// boundsArg is the bounds argument of the apply scripts: a quota's table,
// "" for the other kinds.
func (c Config) boundsArg() string {
	if c.LimitKind() != KindQuota || len(c.Bounds) == 0 {
		return ""
	}
	s, _ := quota.Encode(c.Bounds) // Validate checked it
	return s
}

// packed is the packed limit (FieldPacked) Apply writes for c: lua/packed.lua
// packs the same eight numbers with struct.pack("<dddddddd", ...).
func (c Config) packed() []byte {
	kind := 0.0
	switch c.LimitKind() {
	case KindQuota:
		kind = 1
	case KindConcurrency:
		kind = 2
	}
	shadow := 0.0
	if c.Shadow {
		shadow = 1
	}
	b := make([]byte, 0, 64)
	for _, v := range []float64{kind, float64(c.Capacity), float64(c.PermitsMicro), float64(c.PeriodSeconds),
		float64(c.LeaseMillis), shadow, float64(c.Reserve), float64(c.SlotMillis)} {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	return b
}
