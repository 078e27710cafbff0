package redisscript

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redisscript/limits"
)

// Concurrency limits (docs/protocol.md, "Concurrency limits"): a limit
// of kind concurrency holds at most its capacity of slots at once. A
// slot is taken when work starts, released when it ends, and expires
// after the limit's slot lease time unless renewed, so that a process
// that dies holding slots gives them back by itself.

// FieldSlotMillis is the slot lease time of a concurrency limit, in
// milliseconds (MinSlotMillis..MaxSlotMillis). Written by Apply. Not to
// be confused with FieldLeaseMillis, the batch token leases of a bucket
// in lease mode.
const FieldSlotMillis = "slot_ms"

// Bounds of the slot lease time.
const (
	MinSlotMillis = limits.MinSlotMillis
	MaxSlotMillis = limits.MaxSlotMillis
)

// MaxSlotID is the longest slot id, in bytes.
const MaxSlotID = 64

// WrongKind is the slot script's code for a limit that exists, and that
// the app may use, but is not a concurrency limit.
const WrongKind Code = -6

// SlotOp is what a slot call does.
type SlotOp string

// Operations of the slot script.
const (
	// SlotTake takes a free slot (or renews the slot id when it is held
	// already); at the limit it answers Denied, or WouldDeny in shadow mode
	// (and then takes the slot anyway).
	SlotTake SlotOp = "take"
	// SlotRelease frees a held slot (Allowed); a slot that is not held
	// (released before, expired, never taken) answers Denied and frees
	// nothing.
	SlotRelease SlotOp = "release"
	// SlotRenew moves a held slot's expiry to a full lease time from now
	// (Allowed); a slot that is not held answers Denied.
	SlotRenew SlotOp = "renew"
)

// The scripts that take, release and renew slots: the core (lua/bucket.lua,
// for keyed limits lua/keyed.lua, and the slot rules of lua/slots.lua)
// followed by their own part. A shared limit's script leaves the keyed
// core out: every function of the core is built again at each call, and
// a slot call must cost Redis about what an acquire does.
var (
	SlotScript      = script(coreBucket, corePacked, coreSlots, "lua/slot.lua")
	KeyedSlotScript = script(coreBucket, coreKeyed, coreSlots, "lua/keyed_slot.lua")
)

// Slots returns the key of the slot set of shared concurrency limit
// name: "<prefix>{<name>}:slots", in the hash's Cluster slot.
func (ks Keyspace) Slots(name string) string { return ks.Bucket(name) + ":slots" }

// Slots returns the key of the slot set of the key of a keyed
// concurrency limit: its state key followed by ":slots".
func (k KeyedKeys) Slots() string { return k.State + ":slots" }

// ValidSlotID reports whether id can name a slot: 1 to MaxSlotID bytes
// of ASCII letters, digits, '-', '_', '.' and ':'.
func ValidSlotID(id string) bool {
	if len(id) < 1 || len(id) > MaxSlotID {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' ||
			c == '.' || c == ':') {
			return false
		}
	}
	return true
}

// SlotAnswer is a parsed slot answer. Codes: Allowed (taken, released,
// renewed), Denied (at the limit; for release and renew: the slot was not
// held), WouldDeny (shadow mode: at the limit, the slot was taken
// anyway), UnknownBucket, AppNotAllowed, WrongKind, InvalidN (an op or
// slot id out of its form) and InvalidKey.
type SlotAnswer struct {
	Code Code
	// InUse is the slots held after the call.
	InUse int64
	// Limit is the most slots held at once (the capacity that applied).
	Limit int64
	// RetryAfterMicros is, when a take is denied or would deny, the time
	// until the first held slot expires: when one comes back at the
	// latest, if none is released sooner.
	RetryAfterMicros int64
	// SlotMillis is the limit's slot lease time: a slot taken or renewed
	// now expires that long after the call.
	SlotMillis int64
	// Source is where the limit came from (keyed limits): the limit's
	// own, an exact override or a prefix override.
	Source Source
	// Shadow is true when the limit that applied is in shadow mode.
	Shadow bool
}

// SlotAnswerOf interprets the slot script's reply: seven integers.
func SlotAnswerOf(v []int64) (SlotAnswer, error) {
	if len(v) != 7 || v[0] < int64(WrongKind) || v[0] > int64(WouldDeny) || v[5] < int64(FromBucket) ||
		v[5] > int64(FromPrefix) || (v[6] != 0 && v[6] != 1) {
		return SlotAnswer{}, fmt.Errorf("%w: %v", ErrBadAnswer, v)
	}
	return SlotAnswer{Code: Code(v[0]), InUse: v[1], Limit: v[2], RetryAfterMicros: v[3], SlotMillis: v[4],
		Source: Source(v[5]), Shadow: v[6] == 1}, nil
}

// SlotKeys returns the KEYS of a slot call of limit name: the limit's
// hash and its slot set, or, for a key of a keyed limit (key not empty),
// the key's group hash and its slot set.
func (ks Keyspace) SlotKeys(name, key string) []string {
	if key == "" {
		return []string{ks.Bucket(name), ks.Slots(name)}
	}
	k := ks.Keyed(name, key)
	return []string{k.Config, k.Slots()}
}

// SlotArgs returns the ARGV of a slot call: app, op, slot id and, for a
// keyed limit, the key.
func SlotArgs(app string, op SlotOp, id, key string) []any {
	if key == "" {
		return []any{app, string(op), id}
	}
	return []any{app, string(op), id, key}
}

// RunSlot runs the slot script once (EVALSHA, EVAL after NOSCRIPT): op of
// slot id of concurrency limit name for app, or of key of a keyed limit
// when key is not empty. It is the plain form used by tests and tools;
// services use the client package.
func RunSlot(ctx context.Context, rdb redis.Scripter, ks Keyspace, name, key, app string, op SlotOp, id string) (SlotAnswer, error) {
	return SlotRaw(ctx, rdb, key != "", ks.SlotKeys(name, key), SlotArgs(app, op, id, key)...)
}

// SlotRaw runs the slot script (keyed: the keyed slot script) with the
// keys and arguments as given, so that tests can send what a careless
// client might.
func SlotRaw(ctx context.Context, rdb redis.Scripter, keyed bool, keys []string, args ...any) (SlotAnswer, error) {
	s := SlotScript
	if keyed {
		s = KeyedSlotScript
	}
	v, err := s.Run(ctx, rdb, keys, args...).Int64Slice()
	if err != nil {
		return SlotAnswer{}, fmt.Errorf("slot: %w", err)
	}
	return SlotAnswerOf(v)
}

var readSlotsScript = script("read_slots.lua")

// SlotState is what Redis holds of the slots of a concurrency limit (or
// of one key of a keyed one), at one instant of Redis's clock.
type SlotState struct {
	// InUse is the slots held now: taken, neither released nor expired.
	InUse int64
	// Held is every slot the set keeps, the expired ones that no call has
	// purged yet included.
	Held int64
	// NextExpiry is when the first slot in use expires, LastExpiry when
	// the last one does; zero when none is in use.
	NextExpiry, LastExpiry time.Time
	// Now is Redis TIME when the set was read.
	Now time.Time
}

// ReadSlots returns the slots of concurrency limit name (of key of a keyed
// one when key is not empty) on Redis's clock. It writes nothing: reading
// never purges.
func ReadSlots(ctx context.Context, rdb redis.Scripter, ks Keyspace, name, key string) (SlotState, error) {
	if !ValidName(name) || (key != "" && !ValidKey(key)) {
		return SlotState{}, nil // no such limit can exist
	}
	v, err := readSlotsScript.Run(ctx, rdb, ks.SlotKeys(name, key)[1:]).Slice()
	if err != nil {
		return SlotState{}, fmt.Errorf("read slots of %q: %w", name, err)
	}
	if len(v) != 6 {
		return SlotState{}, fmt.Errorf("read slots of %q: %w: %v", name, ErrBadAnswer, v)
	}
	var n [6]float64
	for i, x := range v {
		var s string
		switch x := x.(type) {
		case string:
			s = x
		case int64:
			s = strconv.FormatInt(x, 10)
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return SlotState{}, fmt.Errorf("read slots of %q: %w: %v", name, ErrBadAnswer, v)
		}
		n[i] = f
	}
	st := SlotState{Now: time.UnixMicro(int64(n[0])*1_000_000 + int64(n[1])), InUse: int64(n[2]), Held: int64(n[3])}
	if st.InUse > 0 {
		st.NextExpiry, st.LastExpiry = time.UnixMicro(int64(n[4])), time.UnixMicro(int64(n[5]))
	}
	return st, nil
}
