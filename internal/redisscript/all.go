package redisscript

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// MaxEntries is the most entries one acquire-all call takes.
const MaxEntries = 32

// Kinds of acquire-all entries. Each kind says how many KEYS an entry uses
// and what its key argument means.
const (
	// EntryBucket is a plain bucket: one KEYS element (the bucket hash) and
	// an empty key argument.
	EntryBucket = "b"
	// EntryKey is a key of a keyed bucket: two KEYS elements (the key
	// group's hash and the key's state) and the caller's key as the key
	// argument.
	EntryKey = "k"
)

// Entry is one (bucket, key, n) of an acquire-all call.
type Entry struct {
	// Bucket is the bucket name.
	Bucket string
	// Key is the caller's key for a keyed bucket, "" for a plain bucket.
	Key string
	// N is the tokens to take.
	N int64
}

// AllAnswer is a parsed acquire-all answer.
type AllAnswer struct {
	// Code is Allowed when every entry was granted (and taken), Denied when
	// at least one had too few tokens, or the first entry's error code
	// (UnknownBucket, AppNotAllowed, ExceedsCapacity, InvalidN, InvalidKey).
	// Nothing is taken unless Code is Allowed.
	Code Code
	// Entries are the answers per entry, in order, as the acquire script
	// gives them, computed as if the entries were taken one after another:
	// Allowed means the entry had enough tokens. Empty when the arguments
	// were malformed as a whole (InvalidN).
	Entries []Answer
}

// AcquireAllArgs appends the KEYS and ARGV of an acquire-all call for app
// and entries to keys and argv and returns them:
//
//	KEYS = per entry, in order: the bucket hash (plain), or the key
//	       group's hash and the key's state (keyed: Key is not "")
//	ARGV = app, m, then per entry: kind, key, n (and "1" when the call is
//	       critical: see AcquireAllCritical)
//
// so that a client can send it in its own pipeline.
func AcquireAllArgs(ks Keyspace, app string, entries []Entry, keys []string, argv []any) ([]string, []any) {
	argv = append(argv, app, strconv.Itoa(len(entries)))
	for _, e := range entries {
		if e.Key == "" {
			keys = append(keys, ks.Bucket(e.Bucket))
			argv = append(argv, EntryBucket, "", strconv.FormatInt(e.N, 10))
			continue
		}
		kk := ks.Keyed(e.Bucket, e.Key)
		keys = append(keys, kk.Config, kk.State)
		argv = append(argv, EntryKey, e.Key, strconv.FormatInt(e.N, 10))
	}
	return keys, argv
}

// AllAnswerOf interprets the acquire-all script's reply for m entries.
func AllAnswerOf(v []int64, m int) (AllAnswer, error) {
	if len(v) == 1 && v[0] == int64(InvalidN) {
		return AllAnswer{Code: InvalidN}, nil
	}
	if len(v) != 1+7*m || v[0] < int64(InvalidKey) || v[0] > int64(Allowed) {
		return AllAnswer{}, fmt.Errorf("%w: acquire-all: %v", ErrBadAnswer, v)
	}
	a := AllAnswer{Code: Code(v[0]), Entries: make([]Answer, m)}
	for i := range m {
		if v[1+7*i] == int64(InvalidKey) {
			a.Entries[i] = Answer{Code: InvalidKey}
			continue
		}
		e, err := AnswerOf(v[1+7*i : 8+7*i])
		if err != nil {
			return AllAnswer{}, err
		}
		a.Entries[i] = e
	}
	return a, nil
}

// AcquireAllCritical is AcquireAll of a call that may be marked critical:
// its entries may then take the reserves of their buckets.
func AcquireAllCritical(ctx context.Context, rdb redis.Scripter, ks Keyspace, app string, entries []Entry,
	critical bool) (AllAnswer, error) {
	keys, argv := AcquireAllArgs(ks, app, entries, nil, nil)
	v, err := AcquireAllScript.Run(ctx, rdb, keys, append(argv, CriticalArg(critical))...).Int64Slice()
	if err != nil {
		return AllAnswer{}, fmt.Errorf("acquire all: %w", err)
	}
	return AllAnswerOf(v, len(entries))
}

// AcquireAll runs the acquire-all script once: app takes every entry's
// tokens, or none. It is the plain form used by tests and tools; services
// use the client package. On Redis Cluster every key of the call must be
// in one slot, or Redis refuses the call (CROSSSLOT) and nothing is taken.
func AcquireAll(ctx context.Context, rdb redis.Scripter, ks Keyspace, app string, entries []Entry) (AllAnswer, error) {
	keys, argv := AcquireAllArgs(ks, app, entries, nil, nil)
	v, err := AcquireAllScript.Run(ctx, rdb, keys, argv...).Int64Slice()
	if err != nil {
		return AllAnswer{}, fmt.Errorf("acquire all: %w", err)
	}
	return AllAnswerOf(v, len(entries))
}
