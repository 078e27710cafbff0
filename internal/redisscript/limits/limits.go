// Package limits holds the numeric limits of a bucket that the stores, the
// Redis scripts and the clients share, so that each is written once. The
// Lua scripts, which cannot import Go, repeat them; a test of
// internal/redisscript holds them to these values.
package limits

const (
	// MaxCapacity is the largest capacity (max_permits) of a bucket, and
	// so the largest n one acquire may ask for.
	MaxCapacity = 1_000_000_000
	// MaxPermits is the most permits a rate adds per period.
	MaxPermits = 1_000_000_000
	// PermitsScale is how finely permits are counted: millionths, so that
	// every rate with up to 6 decimals is exact.
	PermitsScale = 1_000_000
	// MaxPermitsMicro is MaxPermits in millionths.
	MaxPermitsMicro = MaxPermits * PermitsScale
	// MinSlotMillis and MaxSlotMillis bound the slot lease time of a
	// concurrency limit, in milliseconds: 10 ms to a day.
	MinSlotMillis = 10
	MaxSlotMillis = 86_400_000
)
