package redisscript

import (
	"context"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redisscript/quota"
)

// Keyed buckets keep one config per key group and one small state string
// per active key. A bucket's keys are spread over KeyGroups groups, each
// with its own hash tag "{<name>:<group>}", so that on Redis Cluster one
// keyed bucket uses every master while every acquire still touches keys of
// one slot: the group's hash (the bucket config, the prefix overrides and
// the exact overrides of the group's keys) and the key's state. The sync
// worker writes the config and the prefix overrides into every group, and
// each exact override into its key's group only.
//
// Keys are never put into Redis key names: a key's group and state id
// come from its SHA-1 (the id mixed with the bucket name's hash), so any bytes are safe and no key can reach another
// group or another key's state (the acquire script checks it).

// KeyGroups is the number of key groups of every keyed bucket.
const KeyGroups = 64

// MaxKeyLength is the longest key, in bytes.
const MaxKeyLength = 256

// Answer code of the keyed acquire script for a key that is empty, longer
// than MaxKeyLength, or passed with keys it does not hash to.
const InvalidKey Code = -5

// Fields of a group config hash besides the bucket config fields.
const (
	// FieldLens lists the distinct lengths of the live prefix overrides,
	// longest first: "12,8," ("" for none).
	FieldLens = "lens"
	// prefixField is put before a prefix to name its override field.
	prefixField = "p:"
	// exactField is put before a key to name its exact override field.
	exactField = "e:"
	// countField is put before a length to name the count of live prefix
	// overrides of that length.
	countField = "#"
)

// AcquireKeysRaw runs the keyed acquire script once for several acquires:
// keys holds a (group hash, state key) pair per acquire and nk its n and
// key, one after the other. It returns the answers of eight integers.
func AcquireKeysRaw(ctx context.Context, rdb redis.Scripter, keys []string, app string, nk ...string) ([][]int64, error) {
	args := []any{app}
	for _, a := range nk {
		args = append(args, a)
	}
	v, err := KeyedAcquireScript.Run(ctx, rdb, keys, args...).Int64Slice()
	if err != nil {
		return nil, fmt.Errorf("keyed acquire: %w", err)
	}
	if len(v) != 4*len(keys) {
		return nil, fmt.Errorf("%w: %d integers for %d acquires", ErrBadAnswer, len(v), len(keys)/2)
	}
	out := make([][]int64, len(keys)/2)
	for i := range out {
		out[i] = v[8*i : 8*i+8]
	}
	return out, nil
}

// ValidKey reports whether key can be passed to a keyed acquire: 1 to
// MaxKeyLength bytes, any content.
func ValidKey(key string) bool { return len(key) >= 1 && len(key) <= MaxKeyLength }

// KeyHash returns the state id of key in keyed bucket name (11 base64url
// characters, see StateID) and its group (the 9th and 10th bytes of the
// key's SHA-1 modulo KeyGroups).
func KeyHash(name, key string) (state string, group int) {
	id, g := StateID(NameHash(name), key)
	return string(id[:]), g
}

// GroupOf returns the group of key, in every keyed bucket.
func GroupOf(key string) int {
	sum := sha1.Sum([]byte(key))
	return (int(sum[8])<<8 | int(sum[9])) % KeyGroups
}

// NameHash is the 64-bit FNV-1a hash of a bucket name that StateID mixes
// into every state id of the bucket, so that two buckets' states of one
// key differ although their names share no part of the state key.
func NameHash(name string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(name); i++ {
		h ^= uint64(name[i])
		h *= 1099511628211
	}
	return h
}

// StateID returns the state id of key in the bucket whose NameHash is nh:
// the first 8 bytes of the key's SHA-1 (big-endian) XOR nh, in 11
// unpadded base64url characters; and the key's group.
func StateID(nh uint64, key string) (id [11]byte, group int) {
	sum := sha1.Sum([]byte(key))
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], binary.BigEndian.Uint64(sum[:8])^nh)
	base64.RawURLEncoding.Encode(id[:], b[:])
	return id, (int(sum[8])<<8 | int(sum[9])) % KeyGroups
}

// group returns the hash tag of group g of bucket name: "{<name>:<g>}".
func (ks Keyspace) group(name string, g int) string {
	p := ks.prefix()
	b := make([]byte, 0, len(p)+len(name)+8)
	b = append(b, p...)
	b = append(b, "k{"...)
	b = append(b, name...)
	b = append(b, ':')
	b = strconv.AppendInt(b, int64(g), 10)
	b = append(b, '}')
	return string(b)
}

// KeyGroup returns the hash of group g of keyed bucket name:
// "<prefix>k{<name>:<g>}".
func (ks Keyspace) KeyGroup(name string, g int) string { return ks.group(name, g) }

// KeyTombstone returns the tombstone of group g: "<prefix>k{<name>:<g>}:deleted".
func (ks Keyspace) KeyTombstone(name string, g int) string { return ks.group(name, g) + ":deleted" }

// StatePrefix returns what every state key of group g of keyed bucket
// name starts with: "<prefix>{<tag>}<g>", where tag is the 3-character
// hash tag of the group's Cluster slot (SlotTag) and g is the group as
// one base64url character. The state id follows it. A state key so
// carries neither the bucket name nor the key: 24 bytes with the default
// prefix, which Redis keeps in a 32-byte allocation (docs/benchmarks.md,
// "Bytes per idle key").
func (ks Keyspace) StatePrefix(name string, g int) string {
	tag := SlotTag(Slot(name + ":" + strconv.Itoa(g)))
	p := ks.prefix()
	b := make([]byte, 0, len(p)+6)
	b = append(b, p...)
	b = append(b, '{')
	b = append(b, tag[:]...)
	b = append(b, '}', base64url[g])
	return string(b)
}

// KeyedKeys are the Redis keys one keyed acquire touches, in KEYS order.
type KeyedKeys struct {
	Group  int
	Config string // the group's hash
	State  string // the key's state: StatePrefix and the state id
}

// Keyed returns the Redis keys of key in keyed bucket name.
func (ks Keyspace) Keyed(name, key string) KeyedKeys {
	id, g := StateID(NameHash(name), key)
	return KeyedKeys{Group: g, Config: ks.group(name, g), State: ks.StatePrefix(name, g) + string(id[:])}
}

const base64url = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

// Slot returns the Redis Cluster slot of a hash tag's content: CRC16
// (XMODEM) modulo 16384.
func Slot(tag string) int {
	var crc uint16
	for i := 0; i < len(tag); i++ {
		crc ^= uint16(tag[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}

// slotTags holds, for every slot, the first 3-character string of
// base64url characters (in the order of base64url, first character
// slowest) whose Slot is that slot.
var slotTags = sync.OnceValue(func() *[16384][3]byte {
	var t [16384][3]byte
	var found [16384]bool
	left := len(t)
	var s [3]byte
	for i := 0; i < 64*64*64 && left > 0; i++ {
		s[0], s[1], s[2] = base64url[i>>12], base64url[i>>6&63], base64url[i&63]
		if sl := Slot(string(s[:])); !found[sl] {
			found[sl], t[sl] = true, s
			left--
		}
	}
	if left > 0 {
		panic("redisscript: a slot without a 3-character tag")
	}
	return &t
})

// SlotTag returns the 3-character hash tag whose Cluster slot is slot:
// a state key tagged with it lives where its group's hash does.
func SlotTag(slot int) [3]byte { return slotTags()[slot] }

// KeyedRegistry returns the set of keyed bucket names the sync worker has
// written, so that its reconcile finds groups to remove without scanning
// the key states: "<prefix>keyed". Only the worker reads it.
func (ks Keyspace) KeyedRegistry() string { return ks.prefix() + "keyed" }

// Source says which limit a keyed acquire applied.
type Source int8

// Sources of a keyed acquire's limit.
const (
	// FromBucket: the keyed bucket's own limit.
	FromBucket Source = 0
	// FromExact: an exact override of the key.
	FromExact Source = 1
	// FromPrefix: the longest prefix override matching the key.
	FromPrefix Source = 2
)

// KeyedAnswer is a parsed keyed acquire answer: an Answer (whose Code may
// also be InvalidKey) and the source of the limit it applied.
type KeyedAnswer struct {
	Answer
	Source Source
}

// AcquireKey runs the keyed acquire script once (EVALSHA, EVAL after
// NOSCRIPT) for app taking n tokens for key from keyed bucket name. Like
// Acquire it is the plain, unbatched form for tests and tools.
func AcquireKey(ctx context.Context, rdb redis.Scripter, ks Keyspace, name, key, app string, n int64) (KeyedAnswer, error) {
	k := ks.Keyed(name, key)
	return AcquireKeyRaw(ctx, rdb, []string{k.Config, k.State}, app, strconv.FormatInt(n, 10), key)
}

// AcquireKeyRaw runs the keyed acquire script with the keys and arguments
// as given, so that tests can send what a careless client might.
func AcquireKeyRaw(ctx context.Context, rdb redis.Scripter, keys []string, app, n, key string) (KeyedAnswer, error) {
	v, err := KeyedAcquireScript.Run(ctx, rdb, keys, app, n, key).Int64Slice()
	if err != nil {
		return KeyedAnswer{}, fmt.Errorf("keyed acquire: %w", err)
	}
	return KeyedAnswerOf(v)
}

// KeyedAnswerOf interprets the keyed acquire script's reply: the seven
// integers of an acquire (with the extra code InvalidKey) and the source,
// under protocol 2 a ninth, the shadow mode of the limit that applied, and
// under protocol 3 a tenth, its reserve (HasShadow and HasReserve are set
// for the answers that carry them: allowed, denied, would deny and n
// exceeds capacity). An answer of eight integers (no protocol 2, or a
// script of an older release) leaves HasShadow false.
func KeyedAnswerOf(v []int64) (KeyedAnswer, error) {
	if len(v) < 8 || len(v) > 10 || v[7] < int64(FromBucket) || v[7] > int64(FromPrefix) ||
		(len(v) >= 9 && v[8] != 0 && v[8] != 1) {
		return KeyedAnswer{}, fmt.Errorf("%w: %v", ErrBadAnswer, v)
	}
	if v[0] == int64(InvalidKey) {
		return KeyedAnswer{Answer: Answer{Code: InvalidKey}}, nil
	}
	a, err := AnswerOf(v[:7])
	if err == nil && len(v) >= 9 {
		switch a.Code {
		case Allowed, Denied, WouldDeny, ExceedsCapacity:
			a.HasShadow, a.Shadow = true, v[8] == 1
			if len(v) == 10 {
				a.HasReserve, a.Reserve = true, v[9]
			}
		}
	}
	return KeyedAnswer{Answer: a, Source: Source(v[7])}, err
}

// AcquireKeyCritical is AcquireKey of a request that may be marked
// critical, under protocol 3: the answer tells the shadow mode and the
// reserve of the key's limit.
func AcquireKeyCritical(ctx context.Context, rdb redis.Scripter, ks Keyspace, name, key, app string, n int64,
	critical bool) (KeyedAnswer, error) {
	k := ks.Keyed(name, key)
	v, err := KeyedAcquireScript.Run(ctx, rdb, []string{k.Config, k.State}, app, strconv.FormatInt(n, 10), key,
		ProtocolReserve, CriticalArg(critical)).Int64Slice()
	if err != nil {
		return KeyedAnswer{}, fmt.Errorf("keyed acquire: %w", err)
	}
	return KeyedAnswerOf(v)
}

// groupCall is one script call on one group.
type groupCall struct {
	keys []string
	args []any
}

// runGroups runs script once per call, pipelined (a Cluster client splits
// the pipeline per node), with EVALSHA and then EVAL for the calls that
// got NOSCRIPT. It returns the integer replies in order.
func runGroups(ctx context.Context, rdb redis.Cmdable, script Script, calls []groupCall) ([]int64, error) {
	out, errs := runCalls(ctx, rdb, script, calls)
	var failed []error
	for _, err := range errs {
		if err != nil {
			failed = append(failed, err)
		}
	}
	if len(failed) > 0 {
		return out, fmt.Errorf("%d of %d calls failed: %w", len(failed), len(calls), errors.Join(failed...))
	}
	return out, nil
}

// runCalls is runGroups with each call's error apart: errs[i] is nil when
// out[i] is the reply of calls[i].
func runCalls(ctx context.Context, rdb redis.Cmdable, script Script, calls []groupCall) (out []int64, errs []error) {
	out, errs = make([]int64, len(calls)), make([]error, len(calls))
	cmds := make([]*redis.Cmd, len(calls))
	pipe := rdb.Pipeline()
	for i, c := range calls {
		cmds[i] = pipe.EvalSha(ctx, script.Hash(), c.keys, c.args...)
	}
	_, _ = pipe.Exec(ctx)
	var again []int
	for i, cmd := range cmds {
		if err := cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		pipe = rdb.Pipeline()
		for _, i := range again {
			cmds[i] = pipe.Eval(ctx, script.Source(), calls[i].keys, calls[i].args...)
		}
		_, _ = pipe.Exec(ctx)
	}
	for i, cmd := range cmds {
		out[i], errs[i] = cmd.Int64()
	}
	return out, errs
}

// ApplyKeyed writes cfg, the config of a keyed bucket, into every key
// group, with the guards of Apply: a group tombstone with an id >= cfg.ID
// wins (Tombstoned), a larger (id, version) wins unless force (Stale).
// A missing group or one of an older incarnation is Created (the old
// incarnation's overrides are removed); otherwise the config is written
// (Updated) or already there (Unchanged). Key states are not touched:
// each key follows the new config at its next acquire. The outcome is
// the strongest over the groups (Created, then Updated, then Unchanged);
// Stale or Tombstoned only when no group was written.
func ApplyKeyed(ctx context.Context, rdb redis.Cmdable, ks Keyspace, cfg Config, force bool) (ApplyOutcome, error) {
	name := cfg.Name
	if err := cfg.Validate(); err != nil {
		return 0, fmt.Errorf("apply keyed bucket %q: %w", name, err)
	}
	args := cfg.scriptArgs(force, 0) // a keyed bucket has no lease mode
	calls := make([]groupCall, KeyGroups)
	for g := range calls {
		calls[g] = groupCall{keys: []string{ks.KeyGroup(name, g), ks.KeyTombstone(name, g)}, args: args}
	}
	// The registry first: a group written before a crash is still found.
	if err := rdb.SAdd(ctx, ks.KeyedRegistry(), name).Err(); err != nil {
		return 0, fmt.Errorf("apply keyed bucket %q: register: %w", name, err)
	}
	res, err := runGroups(ctx, rdb, keyedApplyScript, calls)
	if err != nil {
		return 0, fmt.Errorf("apply keyed bucket %q: %w", name, err)
	}
	out := strongest(res)
	if out == Created {
		// And again once a group exists: a DeleteKeyed that ran since the
		// first add found no group and took the name out.
		if err := rdb.SAdd(ctx, ks.KeyedRegistry(), name).Err(); err != nil {
			return 0, fmt.Errorf("apply keyed bucket %q: register: %w", name, err)
		}
	}
	return out, nil
}

func strongest(res []int64) ApplyOutcome {
	seen := map[ApplyOutcome]bool{}
	for _, r := range res {
		seen[ApplyOutcome(r)] = true
	}
	for _, o := range []ApplyOutcome{Created, Updated, Unchanged, Tombstoned, Stale} {
		if seen[o] {
			return o
		}
	}
	return Unchanged
}

// DeleteKeyed removes every key group of keyed bucket name unless it holds
// an id larger than id, and records id in each group's tombstone for
// TombstoneTTLSeconds. Key states expire by themselves; they carry the id,
// so a recreated bucket ignores them. It reports whether any group was
// deleted. A group is deleted by the same script as a plain bucket's hash:
// both are a hash guarded by its id and a tombstone.
func DeleteKeyed(ctx context.Context, rdb redis.Cmdable, ks Keyspace, name string, id, version int64) (bool, error) {
	if !ValidName(name) {
		return false, fmt.Errorf("delete keyed bucket %q: %w: name", name, ErrInvalidConfig)
	}
	args := []any{strconv.FormatInt(id, 10), strconv.FormatInt(version, 10), TombstoneTTLSeconds}
	calls := make([]groupCall, KeyGroups)
	for g := range calls {
		calls[g] = groupCall{keys: []string{ks.KeyGroup(name, g), ks.KeyTombstone(name, g)}, args: args}
	}
	res, err := runGroups(ctx, rdb, deleteScript, calls)
	if err != nil {
		return false, fmt.Errorf("delete keyed bucket %q: %w", name, err)
	}
	// Unregister unless a group of a newer incarnation is left: the name
	// goes first and comes back when a group is found after, so that with
	// ApplyKeyed's add after it creates a group, no interleaving of the two
	// leaves a group unregistered.
	if err := rdb.SRem(ctx, ks.KeyedRegistry(), name).Err(); err != nil {
		return false, fmt.Errorf("delete keyed bucket %q: unregister: %w", name, err)
	}
	// One EXISTS per group, in one pipeline (the groups are in different
	// Cluster slots, so not one EXISTS of them all).
	pipe := rdb.Pipeline()
	exists := make([]*redis.IntCmd, KeyGroups)
	for g := range exists {
		exists[g] = pipe.Exists(ctx, ks.KeyGroup(name, g))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return false, fmt.Errorf("delete keyed bucket %q: %w", name, err)
	}
	if slices.ContainsFunc(exists, func(c *redis.IntCmd) bool { return c.Val() > 0 }) {
		if err := rdb.SAdd(ctx, ks.KeyedRegistry(), name).Err(); err != nil {
			return false, fmt.Errorf("delete keyed bucket %q: register: %w", name, err)
		}
	}
	deleted := false
	for _, r := range res {
		deleted = deleted || r == 1
	}
	return deleted, nil
}

// Match kinds of an Override as the scripts spell them.
const (
	MatchExact  = "e"
	MatchPrefix = "p"
)

// Override is one override of a keyed bucket as the sync worker writes it.
type Override struct {
	// Bucket and BucketID name the keyed bucket (its incarnation).
	Bucket   string
	BucketID int64
	// ID and Version guard the writes, like a bucket's.
	ID      int64
	Version int64
	// Match is MatchExact or MatchPrefix; Key the key or the prefix.
	Match string
	Key   string
	// The limit of the matching keys.
	Capacity      int64
	PermitsMicro  int64
	PeriodSeconds int64
	// Shadow puts the matching keys in shadow mode: where the override's
	// limit would deny, the acquire answers WouldDeny and takes nothing.
	Shadow bool
}

// flag is a boolean as the scripts take it.
func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// Validate reports whether o can be written to Redis.
func (o Override) Validate() error {
	switch {
	case !ValidName(o.Bucket):
		return fmt.Errorf("%w: bucket name %q", ErrInvalidConfig, o.Bucket)
	case o.BucketID < 1 || o.ID < 1:
		return fmt.Errorf("%w: bucket id %d and override id %d must be positive", ErrInvalidConfig, o.BucketID, o.ID)
	case o.Version < 0:
		return fmt.Errorf("%w: version %d must not be negative", ErrInvalidConfig, o.Version)
	case o.Match != MatchExact && o.Match != MatchPrefix:
		return fmt.Errorf("%w: override match %q", ErrInvalidConfig, o.Match)
	case !ValidKey(o.Key):
		return fmt.Errorf("%w: override key of %d bytes", ErrInvalidConfig, len(o.Key))
	case o.Capacity < 1 || o.Capacity > MaxCapacity:
		return fmt.Errorf("%w: capacity %d must be between 1 and %d", ErrInvalidConfig, o.Capacity, MaxCapacity)
	case o.PermitsMicro == 0 && o.PeriodSeconds == 0:
		// The override of a kind that does not refill.
	case o.PermitsMicro < 1 || o.PermitsMicro > MaxPermitsMicro:
		return fmt.Errorf("%w: permits must be between 0.000001 and 1000000000", ErrInvalidConfig)
	case o.PeriodSeconds < 1 || o.PeriodSeconds > MaxPeriodSeconds:
		return fmt.Errorf("%w: period %d s must be between 1 and %d", ErrInvalidConfig, o.PeriodSeconds, MaxPeriodSeconds)
	}
	return nil
}

// OverrideOutcome says what ApplyOverride or DeleteOverride did.
type OverrideOutcome int

// Outcomes of the override script.
const (
	OverrideAbsent     OverrideOutcome = 0 // delete: there was no live override
	OverrideWritten    OverrideOutcome = 1 // set: created; delete: deleted
	OverrideUpdated    OverrideOutcome = 2
	OverrideUnchanged  OverrideOutcome = 3
	OverrideStale      OverrideOutcome = 4
	OverrideTombstoned OverrideOutcome = 5 // the bucket was deleted
	OverrideNoBucket   OverrideOutcome = 6 // the bucket's config is not there (yet)
)

// String names the outcome for logs and metrics.
func (o OverrideOutcome) String() string {
	switch o {
	case OverrideAbsent:
		return "absent"
	case OverrideWritten:
		return "written"
	case OverrideUpdated:
		return "updated"
	case OverrideUnchanged:
		return "unchanged"
	case OverrideStale:
		return "stale"
	case OverrideTombstoned:
		return "tombstoned"
	case OverrideNoBucket:
		return "no_bucket"
	}
	return "OverrideOutcome(" + strconv.Itoa(int(o)) + ")"
}

func (o Override) groups() []int {
	if o.Match == MatchExact {
		return []int{GroupOf(o.Key)}
	}
	all := make([]int, KeyGroups)
	for g := range all {
		all[g] = g
	}
	return all
}

func overrideCalls(ks Keyspace, o Override, op string, force bool, extra ...any) ([]groupCall, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	f := "0"
	if force {
		f = "1"
	}
	args := append([]any{strconv.FormatInt(o.BucketID, 10), op, o.Match, o.Key, strconv.FormatInt(o.ID, 10),
		strconv.FormatInt(o.Version, 10), strconv.FormatInt(o.Capacity, 10), FormatPermits(o.PermitsMicro),
		strconv.FormatInt(o.PeriodSeconds, 10), f, flag(o.Shadow)}, extra...)
	gs := o.groups()
	calls := make([]groupCall, len(gs))
	for i, g := range gs {
		calls[i] = groupCall{keys: []string{ks.KeyGroup(o.Bucket, g), ks.KeyTombstone(o.Bucket, g)}, args: args}
	}
	return calls, nil
}

// strongestOverride sums up the outcomes of one override over its groups:
// a write anywhere, else an update, else the first group's.
func strongestOverride(res []int64) OverrideOutcome {
	best := OverrideOutcome(res[0])
	for _, r := range res {
		switch o := OverrideOutcome(r); o {
		case OverrideWritten:
			return o
		case OverrideUpdated:
			best = o
		}
	}
	return best
}

func runOverride(ctx context.Context, rdb redis.Cmdable, ks Keyspace, o Override, op string, force bool) (OverrideOutcome, error) {
	calls, err := overrideCalls(ks, o, op, force)
	if err != nil {
		return 0, err
	}
	res, err := runGroups(ctx, rdb, overrideScript, calls)
	if err != nil {
		return 0, err
	}
	return strongestOverride(res), nil
}

// overrideBatch is how many script calls ApplyOverrides pipelines at once.
const overrideBatch = 1000

// ApplyOverrides is ApplyOverride (op "set") or DeleteOverride (del) for
// many overrides, pipelined in batches, for the reconcile. It returns one
// outcome per override.
func ApplyOverrides(ctx context.Context, rdb redis.Cmdable, ks Keyspace, os []Override, del, force bool) ([]OverrideOutcome, error) {
	op := "set"
	if del {
		op = "del"
		force = false
	}
	out := make([]OverrideOutcome, len(os))
	for start := 0; start < len(os); {
		var calls []groupCall
		var ends []int // calls[ends[i-1]:ends[i]] are those of os[start+i]
		end := start
		for end < len(os) && len(calls) < overrideBatch {
			o := os[end]
			if del {
				o.Capacity, o.PermitsMicro, o.PeriodSeconds = max(o.Capacity, 1), max(o.PermitsMicro, 1), max(o.PeriodSeconds, 1)
			}
			cs, err := overrideCalls(ks, o, op, force)
			if err != nil {
				return nil, fmt.Errorf("apply override %d of %q: %w", o.ID, o.Bucket, err)
			}
			calls = append(calls, cs...)
			ends = append(ends, len(calls))
			end++
		}
		res, err := runGroups(ctx, rdb, overrideScript, calls)
		if err != nil {
			return nil, fmt.Errorf("apply overrides: %w", err)
		}
		from := 0
		for i, to := range ends {
			out[start+i] = strongestOverride(res[from:to])
			from = to
		}
		start = end
	}
	return out, nil
}

// ApplyOverride writes override o: into its key's group when exact, into
// every group when a prefix. A newer (id, version) of the same key and
// match wins unless force (OverrideStale), a deleted bucket wins always
// (OverrideTombstoned), and a group without the bucket's config refuses it
// (OverrideNoBucket: the reconcile writes it once the config is there).
func ApplyOverride(ctx context.Context, rdb redis.Cmdable, ks Keyspace, o Override, force bool) (OverrideOutcome, error) {
	out, err := runOverride(ctx, rdb, ks, o, "set", force)
	if err != nil {
		return 0, fmt.Errorf("apply override %d of %q: %w", o.ID, o.Bucket, err)
	}
	return out, nil
}

// DeleteOverride replaces override o (o.Version is the deletion's) with a
// tombstone, unless a newer (id, version) is there: a late write of the
// deleted override is then refused. Tombstones are removed by
// PurgeOverrideTombstone after TombstoneTTLSeconds. The limit fields of o
// are not used.
func DeleteOverride(ctx context.Context, rdb redis.Cmdable, ks Keyspace, o Override) (OverrideOutcome, error) {
	o.Capacity, o.PermitsMicro, o.PeriodSeconds = max(o.Capacity, 1), max(o.PermitsMicro, 1), max(o.PeriodSeconds, 1)
	out, err := runOverride(ctx, rdb, ks, o, "del", false)
	if err != nil {
		return 0, fmt.Errorf("delete override %d of %q: %w", o.ID, o.Bucket, err)
	}
	return out, nil
}

// GroupState is what Redis holds in one key group of a keyed bucket.
type GroupState struct {
	// Exists is false when the group has no valid config.
	Exists bool
	Config Config
	// Lens is the lens field as stored.
	Lens string
	// Prefixes holds the prefix override fields by prefix, raw values
	// (live or tombstones).
	Prefixes map[string]string
}

// ReadGroup returns the config and prefix overrides of group g of keyed
// bucket name: the config fields in one HMGET, the prefix overrides with
// HSCAN (the hash also holds the group's exact overrides, which may be
// many).
func ReadGroup(ctx context.Context, rdb redis.Cmdable, ks Keyspace, name string, g int) (GroupState, error) {
	key := ks.KeyGroup(name, g)
	fields := []string{FieldID, FieldVersion, FieldCapacity, FieldPermits, FieldPeriod, FieldApps, FieldLens, FieldShadow, FieldKind,
		FieldSlotMillis, FieldBounds, FieldReserve}
	vals, err := rdb.HMGet(ctx, key, fields...).Result()
	if err != nil {
		return GroupState{}, fmt.Errorf("read keyed bucket %q group %d: %w", name, g, err)
	}
	h := make(map[string]string, len(fields))
	for i, v := range vals {
		if s, ok := v.(string); ok {
			h[fields[i]] = s
		}
	}
	st := GroupState{Prefixes: map[string]string{}, Lens: h[FieldLens]}
	if cfg, ok := parseConfig(h); ok {
		cfg.Name = name
		if cfg.LimitKind() == KindQuota {
			// A table that does not decode is as good as none.
			cfg.Bounds, _ = quota.Decode(h[FieldBounds])
		}
		st.Exists, st.Config = true, cfg
	}
	err = scanFields(ctx, rdb, key, prefixField, func(batch map[string]string) error {
		for p, v := range batch {
			st.Prefixes[p] = v
		}
		return nil
	})
	if err != nil {
		return GroupState{}, fmt.Errorf("read prefix overrides of %q group %d: %w", name, g, err)
	}
	return st, nil
}

// scanFields calls fn with batches of the fields of hash key that start
// with kind ("e:" or "p:"), without it (key or prefix -> raw value), using
// HSCAN so that a large hash never blocks Redis.
func scanFields(ctx context.Context, rdb redis.Cmdable, key, kind string, fn func(map[string]string) error) error {
	var cursor uint64
	for {
		kv, next, err := rdb.HScan(ctx, key, cursor, kind+"*", 1000).Result()
		if err != nil {
			return err
		}
		batch := make(map[string]string, len(kv)/2)
		for i := 0; i+1 < len(kv); i += 2 {
			if f, ok := strings.CutPrefix(kv[i], kind); ok {
				batch[f] = kv[i+1]
			}
		}
		if len(batch) > 0 {
			if err := fn(batch); err != nil {
				return err
			}
		}
		if next == 0 {
			return nil
		}
		cursor = next
	}
}

// StoredOverride is an override value as Redis holds it.
type StoredOverride struct {
	// Deleted is set for a tombstone; DeletedAt says when it was written.
	Deleted   bool
	DeletedAt time.Time
	ID        int64
	Version   int64
	// The limit of a live override.
	Capacity      int64
	PermitsMicro  int64
	PeriodSeconds int64
	Shadow        bool
}

// ParseStoredOverride parses an override field value; ok is false for
// anything else.
func ParseStoredOverride(v string) (so StoredOverride, ok bool) {
	f := strings.Fields(v)
	var err [5]error
	switch {
	case len(f) == 4 && f[0] == "d":
		var ts int64
		so.Deleted = true
		so.ID, err[0] = strconv.ParseInt(f[1], 10, 64)
		so.Version, err[1] = strconv.ParseInt(f[2], 10, 64)
		ts, err[2] = strconv.ParseInt(f[3], 10, 64)
		so.DeletedAt = time.Unix(ts, 0)
	case len(f) == 5 || (len(f) == 6 && f[5] == "s"):
		so.Shadow = len(f) == 6
		so.ID, err[0] = strconv.ParseInt(f[0], 10, 64)
		so.Version, err[1] = strconv.ParseInt(f[1], 10, 64)
		so.Capacity, err[2] = strconv.ParseInt(f[2], 10, 64)
		so.PermitsMicro, err[3] = ParsePermits(f[3])
		so.PeriodSeconds, err[4] = strconv.ParseInt(f[4], 10, 64)
	default:
		return StoredOverride{}, false
	}
	if errors.Join(err[:]...) != nil {
		return StoredOverride{}, false
	}
	return so, true
}

// Same reports whether so is the live form of o.
func (so StoredOverride) Same(o Override) bool {
	return !so.Deleted && so.ID == o.ID && so.Version == o.Version && so.Capacity == o.Capacity &&
		so.PermitsMicro == o.PermitsMicro && so.PeriodSeconds == o.PeriodSeconds && so.Shadow == o.Shadow
}

// ScanExact calls fn with batches of the exact overrides of group g (key
// -> raw value), using HSCAN so that a large group never blocks Redis.
func ScanExact(ctx context.Context, rdb redis.Cmdable, ks Keyspace, name string, g int, fn func(map[string]string) error) error {
	if err := scanFields(ctx, rdb, ks.KeyGroup(name, g), exactField, fn); err != nil {
		return fmt.Errorf("scan overrides of %q group %d: %w", name, g, err)
	}
	return nil
}

// PurgeOverrideTombstone removes the tombstone of o's key and match in
// group g when it was written before cutoff. It reports whether it did.
func PurgeOverrideTombstone(ctx context.Context, rdb redis.Cmdable, ks Keyspace, o Override, g int, cutoff time.Time) (bool, error) {
	o.ID, o.Version = max(o.ID, 1), max(o.Version, 0)
	o.Capacity, o.PermitsMicro, o.PeriodSeconds = 1, 1, 1
	if err := o.Validate(); err != nil {
		return false, err
	}
	n, err := overrideScript.Run(ctx, rdb, []string{ks.KeyGroup(o.Bucket, g), ks.KeyTombstone(o.Bucket, g)},
		strconv.FormatInt(o.BucketID, 10), "purge", o.Match, o.Key, "1", "0", "1", "1", "1", "0", "0",
		strconv.FormatInt(cutoff.Unix(), 10)).Int64()
	if err != nil {
		return false, fmt.Errorf("purge override tombstone of %q: %w", o.Bucket, err)
	}
	return n == 1, nil
}

// RepairLens rewrites the lens and count fields of group g from the live
// prefix overrides it holds, for the reconcile (they are kept right by
// every override write; this heals a hash edited by hand).
func RepairLens(ctx context.Context, rdb redis.Cmdable, ks Keyspace, name string, g int, st GroupState) error {
	counts := map[int]int{}
	for p, v := range st.Prefixes {
		if so, ok := ParseStoredOverride(v); ok && !so.Deleted {
			counts[len(p)]++
		}
	}
	want := lensOf(counts)
	key := ks.KeyGroup(name, g)
	pipe := rdb.TxPipeline()
	for l := 1; l <= MaxKeyLength; l++ {
		if counts[l] > 0 {
			pipe.HSet(ctx, key, countField+strconv.Itoa(l), counts[l])
		} else {
			pipe.HDel(ctx, key, countField+strconv.Itoa(l))
		}
	}
	pipe.HSet(ctx, key, FieldLens, want)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("repair prefix lengths of %q group %d: %w", name, g, err)
	}
	return nil
}

// WantLens returns the lens field that the live prefix overrides of st call for.
func (st GroupState) WantLens() string {
	counts := map[int]int{}
	for p, v := range st.Prefixes {
		if so, ok := ParseStoredOverride(v); ok && !so.Deleted {
			counts[len(p)]++
		}
	}
	return lensOf(counts)
}

func lensOf(counts map[int]int) string {
	var b strings.Builder
	for l := MaxKeyLength; l >= 1; l-- {
		if counts[l] > 0 {
			b.WriteString(strconv.Itoa(l))
			b.WriteByte(',')
		}
	}
	return b.String()
}

// groupConfigFields are the fields ReadGroupConfigs asks each group for.
var groupConfigFields = []string{FieldID, FieldVersion, FieldCapacity, FieldPermits, FieldPeriod, FieldApps, FieldShadow, FieldKind,
	FieldSlotMillis, FieldReserve}

// GroupConfigs is the config each key group of a keyed bucket holds, read
// at Now (Redis TIME).
type GroupConfigs struct {
	// Exists[g] is false when group g has no valid config; Configs[g] is
	// its config otherwise.
	Exists  [KeyGroups]bool
	Configs [KeyGroups]Config
	Now     time.Time
}

// ReadGroupConfigs returns the config of every key group of keyed bucket
// name in one pipeline of KeyGroups HMGETs of the config fields and one
// TIME: a bounded read for a live view (the groups' overrides and key
// states are not read). On Redis Cluster the pipeline is split per node.
func ReadGroupConfigs(ctx context.Context, rdb redis.Cmdable, ks Keyspace, name string) (GroupConfigs, error) {
	var out GroupConfigs
	if !ValidName(name) {
		return out, nil
	}
	pipe := rdb.Pipeline()
	tc := pipe.Time(ctx)
	cmds := make([]*redis.SliceCmd, KeyGroups)
	for g := range cmds {
		cmds[g] = pipe.HMGet(ctx, ks.KeyGroup(name, g), groupConfigFields...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return out, fmt.Errorf("read key groups of %q: %w", name, err)
	}
	out.Now = tc.Val()
	h := make(map[string]string, len(groupConfigFields))
	for g, cmd := range cmds {
		clear(h)
		for i, v := range cmd.Val() {
			if s, ok := v.(string); ok {
				h[groupConfigFields[i]] = s
			}
		}
		if cfg, ok := parseConfig(h); ok {
			cfg.Name = name
			out.Exists[g], out.Configs[g] = true, cfg
		}
	}
	return out, nil
}
