// Package buckets holds token bucket definitions: the domain type that
// validates itself, the exact refill Rate, and the MySQL store whose every
// change also writes a change event (outbox) for the sync worker and an
// audit row, in the same transaction.
package buckets

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/apps"
	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/redisscript/limits"
	"github.com/sluicehq/sluice/internal/redisscript/names"
	"github.com/sluicehq/sluice/internal/redisscript/quota"
	"github.com/sluicehq/sluice/internal/redisscript/tokens"
)

// Limits of a Bucket.
const (
	// MaxCapacity is the largest max_permits.
	MaxCapacity = limits.MaxCapacity
	// MaxAllowedApps caps the allowed apps of one bucket; the list travels
	// with every change event and sits in the bucket's Redis hash.
	MaxAllowedApps = 100
	// MinLeaseMillis and MaxLeaseMillis bound the lease time of a bucket in
	// lease mode: long enough to save round trips, short enough that tokens
	// held by a process that stalls or dies come back soon.
	MinLeaseMillis = 10
	MaxLeaseMillis = 10_000
	// MinSlotMillis and MaxSlotMillis bound the slot lease time of a
	// concurrency limit: a slot neither released nor renewed comes back
	// that long after it was taken, so a process that dies holding slots
	// returns them by itself.
	MinSlotMillis = limits.MinSlotMillis
	MaxSlotMillis = limits.MaxSlotMillis
	// DefaultSlotMillis is the slot lease time of a concurrency limit
	// created without one: longer than most calls, short enough that a
	// dead process's slots come back soon.
	DefaultSlotMillis = 30_000
)

// Bucket is a token bucket definition. It belongs to its owner app and
// grants tokens to its allowed apps.
type Bucket struct {
	ID       int64  `json:"id"`
	Name     string `json:"name"`
	OwnerApp string `json:"owner_app"`
	// Kind is what the limit counts; empty is KindBucket. Fixed when the
	// bucket is created.
	Kind        Kind   `json:"kind"`
	Description string `json:"description"`
	// MaxPermits is the capacity: the most tokens the bucket holds.
	MaxPermits int64 `json:"max_permits"`
	// Rate is the refill rate; JSON carries its canonical text ("0.5/s").
	Rate Rate `json:"rate"`
	// AllowedApps may take tokens. Validate sorts and dedupes it and
	// makes it [OwnerApp] when empty.
	AllowedApps []string `json:"allowed_apps"`
	// Keyed buckets keep their token state per caller key (an API key, a
	// user, an IP): each key gets its own MaxPermits and Rate, unless an
	// Override gives it others. Fixed when the bucket is created.
	Keyed bool `json:"keyed"`
	// Shadow puts the bucket in shadow mode: it decides and counts as
	// usual but never refuses; callers are told it would have denied. Teams
	// roll out a new limit with it.
	Shadow bool `json:"shadow"`
	// LeaseMillis turns lease mode on when not 0: clients take tokens in
	// batches and hand them out in-process for at most this many
	// milliseconds (docs/protocol.md). 0, the default, is off.
	LeaseMillis int64 `json:"lease_ms"`
	// QuotaPeriod is a quota's calendar period (hour, day, week from
	// Monday, month); empty for the other kinds.
	QuotaPeriod quota.Period `json:"quota_period"`
	// TimeZone is the IANA time zone a quota's periods start in
	// ("Europe/Berlin"); Validate makes an empty one "UTC" for a quota.
	// Empty for the other kinds. Period and zone may change: the count
	// starts again from 0 when the running period's start moves.
	TimeZone string `json:"time_zone"`
	// SlotMillis is a concurrency limit's slot lease time, in milliseconds
	// (MinSlotMillis to MaxSlotMillis): a slot neither released nor
	// renewed expires that long after it was taken or last renewed;
	// Validate makes 0 DefaultSlotMillis. 0 for the other kinds. Not
	// LeaseMillis: that is a token bucket's lease mode.
	SlotMillis int64 `json:"slot_ms"`
	// Reserve is the tokens kept for requests their callers mark critical:
	// any other request is refused when taking its tokens would leave
	// fewer. A count of permits from 0 (none, the default) to MaxPermits -
	// 1; only a token bucket has one. An override of a keyed bucket keeps
	// the same share of its own capacity (ReserveOf).
	Reserve int64 `json:"reserve"`
	database.Stamp
}

// Validate checks every field a user sets and returns a *errs.Validation
// naming each invalid one (name, owner_app, kind, description, max_permits,
// rate, lease_ms, slot_ms, quota_period, time_zone, reserve, allowed_apps), or nil. It first puts Kind and AllowedApps
// in canonical form: an empty Kind is KindBucket; AllowedApps sorted,
// without duplicates, and [OwnerApp] when empty; a concurrency limit's
// SlotMillis DefaultSlotMillis when 0; a quota's empty TimeZone "UTC".
// Whether the apps exist is checked by the Store.
func (b *Bucket) Validate() error {
	b.Kind = b.Kind.Or()
	if b.Kind == KindConcurrency && b.SlotMillis == 0 {
		b.SlotMillis = DefaultSlotMillis
	}
	b.AllowedApps = normalizeApps(b.AllowedApps, b.OwnerApp)
	b.TimeZone = strings.TrimSpace(b.TimeZone)
	if b.Kind == KindQuota && b.TimeZone == "" {
		b.TimeZone = "UTC"
	}
	var v errs.Validation
	if !b.Kind.Valid() {
		v.Add("kind", KindRule)
	}
	if r := names.Problem(b.Name); r != "" {
		v.Add("name", r)
	}
	if r := names.Problem(b.OwnerApp); r != "" {
		v.Add("owner_app", r)
	}
	checkLimit(&v, b.Kind, b.Description, b.MaxPermits, b.Rate)
	switch {
	case b.LeaseMillis != 0 && !b.Kind.Refills():
		v.Add("lease_ms", "must be 0: lease mode hands out a token bucket's tokens, and a "+string(b.Kind)+" limit has none")
	case b.LeaseMillis != 0 && (b.LeaseMillis < MinLeaseMillis || b.LeaseMillis > MaxLeaseMillis):
		v.Add("lease_ms", LeaseRule)
	}
	checkCalendar(&v, b.Kind, b.QuotaPeriod, b.TimeZone)
	switch {
	case b.Kind == KindConcurrency && (b.SlotMillis < MinSlotMillis || b.SlotMillis > MaxSlotMillis):
		v.Add("slot_ms", SlotRule)
	case b.Kind != KindConcurrency && b.SlotMillis != 0:
		v.Add("slot_ms", "must be empty: only a concurrency limit has a slot lease time")
	}
	switch {
	case b.Reserve != 0 && b.Kind != KindBucket:
		v.Add("reserve", "must be 0: only a token bucket keeps a reserve, and a "+string(b.Kind)+" limit has none")
	default:
		if r := ReserveProblem(b.Reserve, b.MaxPermits); r != "" {
			v.Add("reserve", r)
		}
	}
	if r := allowedAppsProblem(b.AllowedApps); r != "" {
		v.Add("allowed_apps", r)
	}
	return v.Err()
}

// PeriodRule and TimeZoneRule are what a quota's period and time zone must
// be, in words.
const (
	PeriodRule   = `must be "hour", "day", "week" or "month"`
	TimeZoneRule = `must be an IANA time zone name such as "UTC" or "Europe/Berlin"`
)

// checkCalendar adds to v what is wrong with the period and time zone of
// a limit of kind k: a quota needs both, the other kinds have neither.
func checkCalendar(v *errs.Validation, k Kind, p quota.Period, zone string) {
	if k != KindQuota {
		if p != "" {
			v.Add("quota_period", "must be empty: only a quota has a calendar period")
		}
		if zone != "" {
			v.Add("time_zone", "must be empty: only a quota has a time zone")
		}
		return
	}
	if !p.Valid() {
		v.Add("quota_period", PeriodRule)
	}
	if len(zone) > MaxTimeZoneLen {
		v.Add("time_zone", TimeZoneRule)
	} else if _, err := quota.LoadZone(zone); err != nil {
		v.Add("time_zone", fmt.Sprintf("unknown time zone %q: %s", errs.Clip(zone), TimeZoneRule))
	}
}

// MaxTimeZoneLen is the longest time zone name a quota may have (the
// column's size; the longest IANA name has 32 characters).
const MaxTimeZoneLen = 64

// Location is a quota's time zone, or nil when b is not a quota or its
// zone is unknown (Validate refuses that).
func (b *Bucket) Location() *time.Location {
	if b.Kind != KindQuota {
		return nil
	}
	loc, err := quota.LoadZone(b.TimeZone)
	if err != nil {
		return nil
	}
	return loc
}

// checkLimit adds to v what is wrong with the fields a bucket and an
// override both have: the description and the limit of a limit of kind k.
// Only a token bucket refills, so only it has, and needs, a rate.
func checkLimit(v *errs.Validation, k Kind, description string, maxPermits int64, rate Rate) {
	if r := apps.DescriptionProblem(description); r != "" {
		v.Add("description", r)
	}
	if maxPermits < 1 || maxPermits > MaxCapacity {
		v.Add("max_permits", maxPermitsRule)
	}
	switch {
	case !k.Refills():
		if !rate.IsZero() {
			v.Add("rate", "must be empty: a "+string(k)+" limit does not refill")
		}
	default:
		if err := rate.Validate(); err != nil {
			v.Add("rate", errs.Fields(err).For("rate"))
		}
	}
}

// SlotRule is what a slot lease time must be, in words.
var SlotRule = fmt.Sprintf("must be a whole number of milliseconds from %d to %d (a day)", MinSlotMillis, MaxSlotMillis)

// ReserveProblem says what is wrong with a reserve for a bucket of
// capacity maxPermits, or "": it is a whole number of permits below the
// capacity, so that requests not marked critical can always take some.
func ReserveProblem(reserve, maxPermits int64) string {
	switch {
	case reserve < 0:
		return "must be 0 (none) or a whole number of permits"
	case maxPermits >= 1 && maxPermits <= MaxCapacity && reserve >= maxPermits:
		return fmt.Sprintf("must be less than max_permits (%d): requests not marked critical need some permits", maxPermits)
	case reserve > MaxCapacity-1:
		return fmt.Sprintf("must be at most %d", MaxCapacity-1)
	}
	return ""
}

// ReserveOf is the reserve of a limit of capacity maxPermits under the
// bucket's reserve: the bucket's share of it, rounded down. It is the
// reserve of an override's keys (and the bucket's own for its capacity).
func (b *Bucket) ReserveOf(maxPermits int64) int64 {
	return tokens.ScaleReserve(b.Reserve, b.MaxPermits, maxPermits)
}

// LeaseRule is what a lease time must be, in words.
var LeaseRule = fmt.Sprintf("must be 0 (off) or a whole number of milliseconds from %d to %d",
	MinLeaseMillis, MaxLeaseMillis)

// maxPermitsRule is what a capacity must be, in words.
var maxPermitsRule = fmt.Sprintf("must be a whole number from 1 to %d", MaxCapacity)

// ParseMaxPermits reads a capacity as people type it, allowing the
// separators of large numbers ("1,000", "1 000", "1_000"). A value that is
// not a capacity is a *errs.Validation on max_permits.
func ParseMaxPermits(s string) (int64, error) {
	s = strings.NewReplacer(",", "", "_", "", " ", "").Replace(s)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 || n > MaxCapacity {
		return 0, errs.Invalid("max_permits", maxPermitsRule)
	}
	return n, nil
}

// ParseReserve reads a reserve as people type it: "" is 0 (none), and the
// separators of large numbers are allowed, as for ParseMaxPermits. A value
// that is not a whole number is a *errs.Validation on reserve; the range
// (below the capacity) is Validate's.
func ParseReserve(s string) (int64, error) {
	s = strings.NewReplacer(",", "", "_", "", " ", "").Replace(s)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > MaxCapacity {
		return 0, errs.Invalid("reserve", "must be 0 (none) or a whole number of permits below the capacity")
	}
	return n, nil
}

// ReserveSummary says in plain words what a reserve does to a bucket of
// capacity tokens: "keeps 4 of its 10 tokens for critical requests: the
// others get at most 6 at once, and are refused while fewer than 4 would
// be left". "" for no reserve or an invalid one.
func ReserveSummary(capacity, reserve int64) string {
	if reserve < 1 || capacity < 1 || capacity > MaxCapacity || reserve >= capacity {
		return ""
	}
	return "keeps " + groupDigits(strconv.FormatInt(reserve, 10)) + " of its " + groupDigits(strconv.FormatInt(capacity, 10)) +
		" tokens for critical requests: the others get at most " + groupDigits(strconv.FormatInt(capacity-reserve, 10)) +
		" at once, and are refused while fewer than " + groupDigits(strconv.FormatInt(reserve, 10)) + " would be left"
}

// SameSettings reports whether b and o, both validated, have the same
// user-set fields, so that saving b over o would change nothing.
func (b *Bucket) SameSettings(o *Bucket) bool {
	return b.Name == o.Name && b.OwnerApp == o.OwnerApp && b.Description == o.Description &&
		b.MaxPermits == o.MaxPermits && b.Rate == o.Rate && slices.Equal(b.AllowedApps, o.AllowedApps) &&
		b.Kind == o.Kind && b.Keyed == o.Keyed && b.Shadow == o.Shadow && b.LeaseMillis == o.LeaseMillis &&
		b.QuotaPeriod == o.QuotaPeriod && b.TimeZone == o.TimeZone && b.SlotMillis == o.SlotMillis && b.Reserve == o.Reserve
}

// normalizeApps trims, sorts and dedupes names, defaulting to owner.
func normalizeApps(names []string, owner string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		if owner == "" {
			return []string{}
		}
		return []string{owner}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func allowedAppsProblem(list []string) string {
	if len(list) == 0 {
		return "must list at least one app"
	}
	if len(list) > MaxAllowedApps {
		return fmt.Sprintf("must list at most %d apps", MaxAllowedApps)
	}
	var bad []string
	for _, n := range list {
		if !names.Valid(n) {
			bad = append(bad, n)
		}
	}
	switch {
	case len(bad) == 0:
		return ""
	case len(bad) == 1:
		return fmt.Sprintf("%q is not a valid app name", errs.Clip(bad[0]))
	default:
		return fmt.Sprintf("%q and %d more are not valid app names", errs.Clip(bad[0]), len(bad)-1)
	}
}

func unknownApps(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	if len(names) == 1 {
		return "unknown app " + q[0]
	}
	return "unknown apps " + strings.Join(q, ", ")
}

// CheckVersion refuses a change based on version based of b (0: whatever
// is stored) with an *errs.Stale carrying b.
func (b *Bucket) CheckVersion(based int64) error {
	return errs.CheckVersion("bucket "+strconv.Quote(b.Name), b, b.Version, based)
}

// CheckFixed refuses n, a change of old, when it changes a field fixed at
// creation: the name, the owner app (ownership decides who may edit, so
// moving a bucket to another team is a new bucket), kind and keyed. It is a
// *errs.Validation naming each.
func (n *Bucket) CheckFixed(old *Bucket) error {
	var v errs.Validation
	const why = "cannot be changed; create a new bucket and delete this one instead"
	if n.Name != old.Name {
		v.Add("name", why)
	}
	if n.OwnerApp != old.OwnerApp {
		v.Add("owner_app", why)
	}
	if n.Kind.Or() != old.Kind.Or() {
		v.Add("kind", why)
	}
	if n.Keyed != old.Keyed {
		v.Add("keyed", why)
	}
	return v.Err()
}
