package redisscript

import (
	"context"
	"crypto/sha1"
	"embed"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redisscript/quota"
	"github.com/sluicehq/sluice/internal/redisscript/tokens"
)

// Script is one of the Lua scripts of docs/protocol.md. Its Run sends
// EVALSHA and falls back to EVAL on NOSCRIPT.
type Script struct {
	*redis.Script
	src   string
	files []string
}

//go:embed *.lua lua/*.lua
var lua embed.FS

// script joins the named files of lua into one script (Lua has no
// include). The names are constants, so a missing one fails every test at
// once.
func script(names ...string) Script {
	var src []byte
	for _, name := range names {
		b, err := lua.ReadFile(name)
		if err != nil {
			panic(err)
		}
		src = append(src, b...)
	}
	return Script{redis.NewScript(string(src)), string(src), names}
}

// Source returns the script's Lua source, for EVAL and SCRIPT LOAD.
func (s Script) Source() string { return s.src }

// SHA returns the SHA1 of the script's source, for EVALSHA.
func (s Script) SHA() string { return s.Hash() }

// The Lua core (docs/protocol.md, "The Lua core"): the token arithmetic,
// the app check and the answer format in lua/bucket.lua, the key and
// override rules in lua/keyed.lua, the calendar quota in lua/quota.lua
// (docs/protocol.md, "Quotas"). Every script that takes or returns
// tokens is the core followed by its own part.
const (
	coreBucket = "lua/bucket.lua"
	coreKeyed  = "lua/keyed.lua"
	coreSlots  = "lua/slots.lua"
	coreQuota  = "lua/quota.lua"
	// corePacked is the packed limit the apply script writes and the
	// acquire reads.
	corePacked = "lua/packed.lua"
	// coreState reads and writes a token bucket's state in either of its
	// forms (docs/protocol.md, "The bucket state").
	coreState = "lua/state.lua"
)

// The scripts a client runs to take tokens.
var (
	AcquireScript      = script(coreBucket, coreQuota, corePacked, coreState, "lua/acquire.lua")
	KeyedAcquireScript = script(coreBucket, coreQuota, coreKeyed, "lua/keyed_acquire.lua")
	AcquireAllScript   = script(coreBucket, coreQuota, coreKeyed, coreState, "lua/acquire_all.lua")
	AdjustScript       = script(coreBucket, coreState, "lua/adjust.lua")
	LeaseScript        = script(coreBucket, coreState, "lua/lease.lua")
)

// Library is the token scripts as one Redis function library (Redis 7
// and later): FUNCTION LOAD runs the library's chunk once, so the core's
// local functions are made once instead of on every call, as an EVALSHA's
// chunk makes them (docs/protocol.md, "As a Redis function"). FCALL of a
// script's function answers exactly as the script's EVALSHA; a client
// falls back to the script where the library cannot be loaded. The
// library's name and its functions' carry a hash of its source, so
// clients of different versions never replace each other's functions.
type Library struct {
	// Name is the library's name, sluice_<12 hex digits of a SHA1>.
	Name string
	// Source is the library's source for FUNCTION LOAD.
	Source string
	fns    map[string]string // script SHA1 -> function name
}

// Function returns the name of script s's function in the library, for
// FCALL, or "" when s is not in it.
func (l Library) Function(s Script) string { return l.fns[s.SHA()] }

// library joins the cores once, then each script's own part (the last of
// its files) as the body of a registered function named after it; the
// parameters are named KEYS and ARGV, as a script's globals are. Every
// script's cores must be among cores: a part sees all of them.
func library(cores []string, scripts map[string]Script) Library {
	names := slices.Sorted(maps.Keys(scripts))
	var src strings.Builder
	for _, c := range cores {
		b, err := lua.ReadFile(c)
		if err != nil {
			panic(err)
		}
		src.Write(b)
	}
	parts := make([]string, len(names))
	h := sha1.New()
	h.Write([]byte(src.String()))
	for i, n := range names {
		s := scripts[n]
		b, err := lua.ReadFile(s.files[len(s.files)-1])
		if err != nil {
			panic(err)
		}
		for _, f := range s.files[:len(s.files)-1] {
			if !slices.Contains(cores, f) {
				panic("redisscript: library lacks core " + f + " of " + n)
			}
		}
		parts[i] = string(b)
		h.Write(b)
	}
	tag := hex.EncodeToString(h.Sum(nil)[:6])
	l := Library{Name: "sluice_" + tag, fns: make(map[string]string, len(names))}
	for i, n := range names {
		fn := "sluice_" + strings.TrimSuffix(n, ".lua") + "_" + tag
		l.fns[scripts[n].SHA()] = fn
		src.WriteString("redis.register_function('" + fn + "', function(KEYS, ARGV)\n" + parts[i] + "end)\n")
	}
	l.Source = "#!lua name=" + l.Name + "\n" + src.String()
	return l
}

// LoadFunctions loads Functions on the server of rdb (FUNCTION LOAD). A
// library of the same name already there is this one, since the name
// carries a hash of the source: that is no error.
func LoadFunctions(ctx context.Context, rdb redis.Cmdable) error {
	err := rdb.FunctionLoad(ctx, Functions.Source).Err()
	var rerr redis.Error
	if errors.As(err, &rerr) && strings.Contains(err.Error(), "already exists") {
		return nil
	}
	return err
}

// Functions is the token scripts as a library: every published script,
// each registered as sluice_<file name without .lua>_<hash>.
var Functions = library([]string{coreBucket, coreQuota, corePacked, coreState, coreKeyed, coreSlots}, Published)

// Published maps the file names of the stand-alone token scripts, which
// clients in other languages load (this directory, with their SHA1 in
// docs/protocol.md), to the scripts: each file is byte for byte the
// script's Source. A test keeps them so; `SLUICE_WRITE_SCRIPTS=1 go test
// -run TestPublishedScripts` rewrites them after a change to lua/.
var Published = map[string]Script{
	"acquire.lua":       AcquireScript,
	"keyed_acquire.lua": KeyedAcquireScript,
	"acquire_all.lua":   AcquireAllScript,
	"adjust.lua":        AdjustScript,
	"lease.lua":         LeaseScript,
	"slot.lua":          SlotScript,
	"keyed_slot.lua":    KeyedSlotScript,
}

// configGuards holds the argument checks and (id, version) guards of the
// scripts that write definitions; each is sent after it.
const configGuards = "config_guards.lua"

// The scripts the sync worker runs to write definitions.
var (
	applyScript      = script(configGuards, corePacked, coreState, "apply.lua")
	keyedApplyScript = script(configGuards, "keyed_apply.lua")
	overrideScript   = script(configGuards, "override.lua")
	deleteScript     = script(configGuards, "delete.lua")
	readScript       = script("read.lua")
)

// ApplyOutcome says what Apply did.
type ApplyOutcome int

// Outcomes of Apply.
const (
	// Created: the hash was missing or held an older incarnation (smaller
	// id); the config was written and the bucket starts full.
	Created ApplyOutcome = 1
	// Updated: the config was written; the tokens were kept, refilled at the
	// old rate up to now and clamped to the new capacity.
	Updated ApplyOutcome = 2
	// Unchanged: the hash already held this exact config, id and version.
	Unchanged ApplyOutcome = 3
	// Stale: the hash holds a newer (id, version); nothing was written.
	Stale ApplyOutcome = 4
	// Tombstoned: this id (or a newer one) of the name was deleted; nothing
	// was written.
	Tombstoned ApplyOutcome = 5
)

// String names the outcome for logs.
func (o ApplyOutcome) String() string {
	switch o {
	case Created:
		return "created"
	case Updated:
		return "updated"
	case Unchanged:
		return "unchanged"
	case Stale:
		return "stale"
	case Tombstoned:
		return "tombstoned"
	}
	return "ApplyOutcome(" + strconv.Itoa(int(o)) + ")"
}

// Apply writes cfg as the config of bucket cfg.Name in one atomic script. A
// tombstone with an id >= cfg.ID wins (Tombstoned). A hash holding a
// larger (id, version) wins unless force (Stale). A missing hash or a
// smaller id is a new incarnation that starts full (Created). Otherwise the
// config is written and the tokens kept, clamped to the new capacity
// (Updated), or nothing changes (Unchanged). force is for a reconcile that
// knows MySQL is right; it never overrides a tombstone.
func Apply(ctx context.Context, rdb redis.Scripter, ks Keyspace, cfg Config, force bool) (ApplyOutcome, error) {
	args, err := applyArgs(cfg, force)
	if err != nil {
		return 0, err
	}
	n, err := ApplyRaw(ctx, rdb, ks, cfg.Name, args...)
	return applyOutcome(cfg.Name, n, err)
}

// ApplyMany applies each of cfgs as Apply does, in one pipeline (a
// Cluster client splits it per node): outs[i] and errs[i] are Apply's
// answer for cfgs[i], so an invalid config fails only itself. The calls
// are sent in order; each is atomic on its own, not the lot.
func ApplyMany(ctx context.Context, rdb redis.Cmdable, ks Keyspace, cfgs []Config, force bool) (outs []ApplyOutcome, errs []error) {
	outs, errs = make([]ApplyOutcome, len(cfgs)), make([]error, len(cfgs))
	calls := make([]groupCall, 0, len(cfgs))
	sent := make([]int, 0, len(cfgs))
	for i, cfg := range cfgs {
		args, err := applyArgs(cfg, force)
		if err != nil {
			errs[i] = err
			continue
		}
		calls = append(calls, groupCall{keys: []string{ks.Bucket(cfg.Name), ks.Tombstone(cfg.Name)}, args: args})
		sent = append(sent, i)
	}
	if len(calls) == 0 {
		return outs, errs
	}
	ns, nerrs := runCalls(ctx, rdb, applyScript, calls)
	for k, i := range sent {
		outs[i], errs[i] = applyOutcome(cfgs[i].Name, ns[k], nerrs[k])
	}
	return outs, errs
}

// applyArgs are the apply script's arguments for cfg, after checking it.
func applyArgs(cfg Config, force bool) ([]any, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("apply bucket %q: %w", cfg.Name, err)
	}
	state := "binary"
	if cfg.DecimalState {
		state = "decimal"
	}
	return append(cfg.scriptArgs(force, cfg.LeaseMillis), state), nil
}

// scriptArgs are the arguments of the apply scripts (a bucket's hash and a
// keyed bucket's groups) for c, checked by Validate, with leaseMillis as
// the lease time.
func (c Config) scriptArgs(force bool, leaseMillis int64) []any {
	return []any{strconv.FormatInt(c.ID, 10), strconv.FormatInt(c.Version, 10), strconv.FormatInt(c.Capacity, 10),
		FormatPermits(c.PermitsMicro), strconv.FormatInt(c.PeriodSeconds, 10), joinApps(c.Apps), flag(force),
		strconv.FormatInt(leaseMillis, 10), flag(c.Shadow), c.LimitKind(), c.boundsArg(), strconv.FormatInt(c.SlotMillis, 10),
		strconv.FormatInt(c.Reserve, 10)}
}

// applyOutcome reads the apply script's answer n (or error) for bucket name.
func applyOutcome(name string, n int64, err error) (ApplyOutcome, error) {
	if err != nil {
		return 0, fmt.Errorf("apply bucket %q: %w", name, err)
	}
	if n < int64(Created) || n > int64(Tombstoned) {
		return 0, fmt.Errorf("apply bucket %q: unexpected answer %d", name, n)
	}
	return ApplyOutcome(n), nil
}

// Delete removes the hash of bucket name unless it holds an id larger than
// id (a newer incarnation), and records id in the bucket's tombstone
// (keeping the larger of the old and new value) for TombstoneTTLSeconds, so
// that a stale apply of a deleted incarnation is refused. version is the
// version of the deletion; it does not guard anything (a delete ends its
// incarnation whatever the version) and is sent for traces only. It
// reports whether a hash was deleted.
func Delete(ctx context.Context, rdb redis.Scripter, ks Keyspace, name string, id, version int64) (bool, error) {
	switch {
	case !ValidName(name):
		return false, fmt.Errorf("delete bucket %q: %w: name", name, ErrInvalidConfig)
	case id < 0 || id > MaxID || version < 0 || version > MaxID:
		return false, fmt.Errorf("delete bucket %q: %w: id %d version %d", name, ErrInvalidConfig, id, version)
	}
	n, err := DeleteRaw(ctx, rdb, ks, name, strconv.FormatInt(id, 10), strconv.FormatInt(version, 10), TombstoneTTLSeconds)
	if err != nil {
		return false, fmt.Errorf("delete bucket %q: %w", name, err)
	}
	return n == 1, nil
}

// ApplyRaw runs the apply script for bucket name with raw arguments, in
// the order of docs/protocol.md and unchecked, so that tests can send what
// a careless writer might ("1e1", " 1", "0x10"); Apply checks and formats
// them.
func ApplyRaw(ctx context.Context, rdb redis.Scripter, ks Keyspace, name string, args ...any) (int64, error) {
	return applyScript.Run(ctx, rdb, []string{ks.Bucket(name), ks.Tombstone(name)}, args...).Int64()
}

// DeleteRaw runs the delete script for bucket name with raw arguments, as
// ApplyRaw does for the apply script.
func DeleteRaw(ctx context.Context, rdb redis.Scripter, ks Keyspace, name string, args ...any) (int64, error) {
	return deleteScript.Run(ctx, rdb, []string{ks.Bucket(name), ks.Tombstone(name)}, args...).Int64()
}

// State is what Redis holds about one bucket.
type State struct {
	// Exists is false when there is no hash (or it lacks a valid config).
	Exists bool
	// Config is the stored config; zero when !Exists.
	Config Config
	// Tokens is the token count refilled up to Now, capped at capacity,
	// exactly as the next acquire would see it.
	Tokens float64
	// Stored is the raw tokens field: the count the last acquire left.
	Stored float64
	// Refilled is the ts field: when the last acquire refilled.
	Refilled time.Time
	// Now is Redis TIME when the hash was read.
	Now time.Time
	// Used is, for a quota, its count in the period containing Now, and
	// PeriodStart and PeriodEnd that period: zero when its table does
	// not cover Now (the acquire script then answers unknown bucket).
	Used                   int64
	PeriodStart, PeriodEnd time.Time
	// PackedDiffers is set when the hash holds a packed limit
	// (FieldPacked) that is not its fields' limit: the acquire would
	// decide with it, so the reconcile rewrites the hash.
	PackedDiffers bool

	// packed is whether the hash holds a packed limit: its server has the
	// struct library, which the binary state needs.
	packed bool
}

// StateFormRight reports whether st's hash keeps its tokens in the form
// Apply writes for decimal (Config.DecimalState), so that a reconcile
// moves a bucket whose form differs: a hash without a packed limit is on
// a server without the struct library, where the decimal form is the
// only one.
func (st State) StateFormRight(decimal bool) bool {
	return !st.packed || st.Config.DecimalState == decimal
}

// quotaState fills st's quota fields from the hash fields h at now (µs).
func (st *State) quotaState(h map[string]string, now int64) {
	b, err := quota.Decode(h[FieldBounds])
	if err != nil {
		return
	}
	s, e, ok := quota.Find(b, now)
	if !ok {
		return
	}
	st.Config.Bounds = b
	st.PeriodStart, st.PeriodEnd = time.Unix(s, 0), time.Unix(e, 0)
	if ps, err := strconv.ParseInt(h[FieldPeriodStart], 10, 64); err == nil && ps == s {
		st.Used, _ = strconv.ParseInt(h[FieldUsed], 10, 64)
	}
}

// Read returns the config and live state of bucket name, for the console
// and the reconcile. One script reads the raw fields and Redis TIME on the
// same server; Tokens is computed here with the acquire script's formula.
func Read(ctx context.Context, rdb redis.Scripter, ks Keyspace, name string) (State, error) {
	if !ValidName(name) {
		return State{}, nil // no such name can exist
	}
	vals, err := readScript.Run(ctx, rdb, []string{ks.Bucket(name)}).StringSlice()
	if err != nil {
		return State{}, fmt.Errorf("read bucket %q: %w", name, err)
	}
	if len(vals) < 2 {
		return State{}, fmt.Errorf("read bucket %q: short answer", name)
	}
	sec, err1 := strconv.ParseInt(vals[0], 10, 64)
	usec, err2 := strconv.ParseInt(vals[1], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return State{}, fmt.Errorf("read bucket %q: time: %w", name, err)
	}
	h := make(map[string]string, (len(vals)-2)/2)
	for i := 2; i+1 < len(vals); i += 2 {
		h[vals[i]] = vals[i+1]
	}
	return stateOf(name, h, time.UnixMicro(sec*1_000_000+usec)), nil
}

// stateOf is the State of bucket name whose hash holds the fields h, read
// at now (Redis TIME): Read's and ReadMany's answer.
func stateOf(name string, h map[string]string, now time.Time) State {
	st := State{Now: now}
	cfg, ok := parseConfig(h)
	if !ok {
		return st
	}
	cfg.Name = name
	st.Exists, st.Config = true, cfg
	if p, ok := h[FieldPacked]; ok {
		st.packed, st.PackedDiffers = true, p != string(cfg.packed())
	}
	st.Config.DecimalState = !binaryState(h[FieldState])
	nowMicro := now.UnixMicro()
	if cfg.Kind == KindQuota {
		st.quotaState(h, nowMicro)
		return st
	}
	tokens, ts, ok := Stored(h)
	if !ok {
		// No state yet: the acquire script treats the bucket as full.
		st.Tokens, st.Stored, st.Refilled = float64(cfg.Capacity), float64(cfg.Capacity), now
		return st
	}
	st.Stored, st.Refilled = tokens, time.UnixMicro(ts)
	st.Tokens = Refill(cfg, tokens, ts, nowMicro)
	return st
}

// Stored returns the tokens and ts (microseconds of Redis TIME) a token
// bucket's hash h holds, in whichever form (docs/protocol.md, "The bucket
// state"), as the scripts read them; ok is false when it holds none.
func Stored(h map[string]string) (tokens float64, ts int64, ok bool) {
	if b := h[FieldState]; binaryState(b) {
		tokens = math.Float64frombits(binary.LittleEndian.Uint64([]byte(b[:8])))
		tsf := math.Float64frombits(binary.LittleEndian.Uint64([]byte(b[8:])))
		if math.IsNaN(tokens) || math.IsNaN(tsf) || math.Abs(tsf) > 1<<62 {
			return 0, 0, false
		}
		return tokens, int64(tsf), true
	}
	tokens, err1 := strconv.ParseFloat(h[FieldTokens], 64)
	ts, err2 := strconv.ParseInt(h[FieldTS], 10, 64)
	return tokens, ts, err1 == nil && err2 == nil
}

// EncodeState is the binary form of a state of tokens at ts (microseconds
// of Redis TIME), as lua/state.lua packs it.
func EncodeState(tokens float64, ts int64) string {
	b := make([]byte, 16)
	binary.LittleEndian.PutUint64(b, math.Float64bits(tokens))
	binary.LittleEndian.PutUint64(b[8:], math.Float64bits(float64(ts)))
	return string(b)
}

// ReadStored returns the tokens and ts that the hash of bucket name holds,
// in either form, as the last write left them (no refill): for tools and
// tests that look at a bucket's raw state. ok is false when it holds none.
func ReadStored(ctx context.Context, rdb redis.Cmdable, ks Keyspace, name string) (tokens float64, ts int64, ok bool,
	err error) {
	v, err := rdb.HMGet(ctx, ks.Bucket(name), FieldState, FieldTokens, FieldTS).Result()
	if err != nil {
		return 0, 0, false, fmt.Errorf("read state of bucket %q: %w", name, err)
	}
	h := make(map[string]string, 3)
	for i, f := range []string{FieldState, FieldTokens, FieldTS} {
		if s, isString := v[i].(string); isString {
			h[f] = s
		}
	}
	tokens, ts, ok = Stored(h)
	return tokens, ts, ok, nil
}

// binaryState is whether v is a state in the binary form: two
// little-endian doubles, as lua/state.lua packs them.
func binaryState(v string) bool { return len(v) == 16 }

// Refill returns the tokens of a bucket with config cfg that held tokens
// at ts, at time now (both in microseconds), as the acquire script
// computes them: a clock that went backwards adds nothing, and the result
// is capped at capacity.
//
// A bucket in debt reads as 0 here (what a console shows); the acquire
// script keeps the debt.
func Refill(cfg Config, tokens float64, ts, now int64) float64 {
	if cfg.PeriodSeconds <= 0 || cfg.PermitsMicro <= 0 {
		return math.Max(0, math.Min(tokens, float64(cfg.Capacity)))
	}
	tokens, _ = cfg.Limit().Refill(tokens, ts, now)
	return math.Max(0, tokens)
}

func parseConfig(h map[string]string) (Config, bool) {
	var c Config
	var errs [5]error
	c.ID, errs[0] = strconv.ParseInt(h[FieldID], 10, 64)
	c.Version, errs[1] = strconv.ParseInt(h[FieldVersion], 10, 64)
	c.Capacity, errs[2] = strconv.ParseInt(h[FieldCapacity], 10, 64)
	c.PermitsMicro, errs[3] = ParsePermits(h[FieldPermits])
	c.PeriodSeconds, errs[4] = strconv.ParseInt(h[FieldPeriod], 10, 64)
	if errors.Join(errs[:]...) != nil {
		return Config{}, false
	}
	c.Apps = splitApps(h[FieldApps])
	if v, ok := h[FieldLeaseMillis]; ok {
		c.LeaseMillis, _ = strconv.ParseInt(v, 10, 64)
	}
	c.Shadow = h[FieldShadow] == "1"
	if v, ok := h[FieldSlotMillis]; ok {
		c.SlotMillis, _ = strconv.ParseInt(v, 10, 64)
	}
	if k := h[FieldKind]; k != KindBucket {
		c.Kind = k
	}
	if v, ok := h[FieldReserve]; ok {
		c.Reserve, _ = strconv.ParseInt(v, 10, 64)
	}
	return c, true
}

// MaxReadMany bounds the names of one ReadMany: a page of buckets.
const MaxReadMany = 200

// readManyFields are the fields ReadMany asks for, in order.
var readManyFields = []string{FieldID, FieldVersion, FieldCapacity, FieldPermits, FieldPeriod, FieldApps,
	FieldLeaseMillis, FieldTokens, FieldTS, FieldShadow, FieldKind, FieldSlotMillis, FieldBounds, FieldUsed, FieldPeriodStart,
	FieldReserve, FieldPacked, FieldState}

// ReadMany returns the state of each bucket of names (a page: at most
// MaxReadMany), as Read does, in one pipeline of one HMGET per bucket and
// one TIME: a bounded read for a list page, never a scan. Invalid names
// answer a State that does not exist.
func ReadMany(ctx context.Context, rdb redis.Cmdable, ks Keyspace, names []string) (map[string]State, error) {
	if len(names) > MaxReadMany {
		return nil, fmt.Errorf("read buckets: %d names, at most %d at once", len(names), MaxReadMany)
	}
	out := make(map[string]State, len(names))
	if len(names) == 0 {
		return out, nil
	}
	pipe := rdb.Pipeline()
	tm := pipe.Time(ctx)
	cmds := make(map[string]*redis.SliceCmd, len(names))
	for _, n := range names {
		if ValidName(n) {
			cmds[n] = pipe.HMGet(ctx, ks.Bucket(n), readManyFields...)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("read buckets: %w", err)
	}
	now := tm.Val()
	for _, n := range names {
		cmd := cmds[n]
		if cmd == nil {
			out[n] = State{Now: now}
			continue
		}
		h := make(map[string]string, len(readManyFields))
		for i, v := range cmd.Val() {
			if s, ok := v.(string); ok && i < len(readManyFields) {
				h[readManyFields[i]] = s
			}
		}
		out[n] = stateOf(n, h, now)
	}
	return out, nil
}

// Limit is the config's limit for the Go core of the token bucket.
func (c Config) Limit() tokens.Limit {
	return tokens.Limit{Capacity: c.Capacity, PermitsMicro: c.PermitsMicro, Period: float64(c.PeriodSeconds),
		Reserve: c.Reserve}
}

// ReserveLeft is how much of the reserve a bucket holding tokens still
// has: the whole tokens of the reserve that are there, 0 to Reserve.
func (c Config) ReserveLeft(tokens float64) int64 {
	return max(0, min(c.Reserve, int64(math.Floor(tokens))))
}
