package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/internal/redisscript"
)

// Request is one bucket (and key) and token count of AcquireAll.
type Request struct {
	// Bucket is the bucket name.
	Bucket string
	// Key is the caller's key (1 to 256 bytes) when Bucket is a keyed
	// bucket: the request takes from that key's tokens, under the bucket's
	// limit or the most specific override's, as AcquireKey does. "" for a
	// plain bucket.
	Key string
	// N is the tokens to take, 1 to 1e9.
	N int64
}

// MaxRequests is the most requests one AcquireAll takes.
const MaxRequests = redisscript.MaxEntries

// Results is the answer to one AcquireAll.
type Results struct {
	// Allowed reports whether every request was granted. When false,
	// nothing was taken from any bucket.
	Allowed bool
	// RetryAfter is, when denied, the longest RetryAfter of the requests
	// that lacked tokens: when all of them could be granted (if nobody
	// else takes the tokens first).
	RetryAfter time.Duration
	// Each holds the answer per request, in the order of the requests,
	// computed as if the earlier requests were taken: Each[i].Allowed
	// equals Allowed, and Each[i].RetryAfter is 0 for a request whose
	// bucket had enough tokens left for it.
	Each []Result
	// Fallback is true when the failure policy answered instead of Redis.
	Fallback bool
}

// AcquireAll takes the tokens of every request in one atomic call: either
// all are granted, or none is charged. Requests may mix plain buckets and
// keys of keyed buckets ("5/s per user and 1000/s in all"). A bucket, or a
// key of a keyed bucket, may appear more than once; its requests add up.
// It returns the error of the first request that can never succeed
// (ErrUnknownBucket, also for a keyed request on a plain bucket or a plain
// one on a keyed bucket; ErrAppNotAllowed, ErrExceedsCapacity,
// ErrInvalidN, ErrInvalidKey; wrapped with the request's index and
// bucket), ErrInvalidN for no requests or more than MaxRequests, and
// ErrCrossSlot when, on Redis Cluster, the requests' keys are not all in
// one hash slot (see docs/decisions.md).
// While Redis is unavailable FailOpen grants the set, and FailClosed and
// FailLocal refuse it with ErrUnavailable: local buckets are per instance
// and cannot take from several buckets atomically. A ctx marked Critical
// marks every request of the set critical: they may take the reserves.
func (l *Limiter) AcquireAll(ctx context.Context, reqs []Request) (Results, error) {
	var start time.Time
	if l.opt.observe != nil {
		start = time.Now()
	}
	res, err := l.acquireAll(ctx, reqs)
	if l.opt.observe != nil {
		lat := time.Since(start)
		for i, r := range reqs {
			d := Decision{Bucket: r.Bucket, Key: r.Key, N: r.N, Err: err, Latency: lat}
			if i < len(res.Each) {
				d.Result = res.Each[i]
			}
			l.opt.observe(d)
		}
	}
	return res, err
}

func (l *Limiter) acquireAll(ctx context.Context, reqs []Request) (Results, error) {
	if len(reqs) == 0 || len(reqs) > MaxRequests {
		return Results{}, fmt.Errorf("sluice: %d requests, want 1 to %d: %w", len(reqs), MaxRequests, ErrInvalidN)
	}
	entries := make([]redisscript.Entry, len(reqs))
	for i, r := range reqs {
		switch {
		case r.N < 1 || r.N > redisscript.MaxN:
			return Results{}, requestErr(i, r, ErrInvalidN)
		case !redisscript.ValidName(r.Bucket):
			return Results{}, requestErr(i, r, ErrUnknownBucket)
		case len(r.Key) > redisscript.MaxKeyLength:
			return Results{}, requestErr(i, r, ErrInvalidKey)
		}
		entries[i] = redisscript.Entry{Bucket: r.Bucket, Key: r.Key, N: r.N}
	}
	keys, argv := redisscript.AcquireAllArgs(l.ks, l.app, entries, make([]string, 0, 2*len(reqs)),
		make([]any, 0, 3+3*len(reqs)))
	if IsCritical(ctx) {
		argv = append(argv, redisscript.CriticalArg(true))
	}
	if err := l.oneSlot(reqs, keys); err != nil {
		return Results{}, err
	}
	reply, err := l.runScript(ctx, allScript, keys, argv)
	var rep errReply
	switch {
	case err == nil:
	case errors.Is(err, ErrUnavailable), errors.As(err, &rep):
		return l.fallbackAll(reqs)
	default:
		return Results{}, err
	}
	a, err := redisscript.AllAnswerOf(reply, len(reqs))
	if err != nil {
		l.failed()
		return l.fallbackAll(reqs)
	}
	res := Results{Allowed: a.Code == redisscript.Allowed, Each: make([]Result, len(a.Entries))}
	for i, e := range a.Entries {
		r := Result{
			Allowed:    res.Allowed,
			WouldDeny:  e.Code == redisscript.WouldDeny,
			Remaining:  e.Remaining,
			RetryAfter: time.Duration(e.RetryAfterMicros) * time.Microsecond,
			Limit:      e.Capacity,
			ResetAfter: time.Duration(e.ResetAfterMicros) * time.Microsecond,
		}
		if res.Allowed && !r.WouldDeny {
			r.RetryAfter = 0
		}
		res.Each[i] = r
		if !res.Allowed {
			res.RetryAfter = max(res.RetryAfter, r.RetryAfter)
		}
	}
	switch a.Code {
	case redisscript.Allowed, redisscript.Denied:
		return res, nil
	}
	for i, e := range a.Entries {
		if e.Code == a.Code {
			return res, requestErr(i, reqs[i], codeErr(a.Code))
		}
	}
	return res, codeErr(a.Code)
}

// fallbackAll answers AcquireAll by the failure policy.
func (l *Limiter) fallbackAll(reqs []Request) (Results, error) {
	res := Results{Fallback: true, Each: make([]Result, len(reqs))}
	if l.opt.policy == FailOpen {
		res.Allowed = true
		for i := range res.Each {
			res.Each[i] = Result{Allowed: true, Fallback: true}
		}
		return res, nil
	}
	res.RetryAfter = l.opt.probe
	for i := range res.Each {
		res.Each[i] = Result{RetryAfter: l.opt.probe, Fallback: true}
	}
	return res, ErrUnavailable
}

// codeErr maps an error code of a script answer to the client's error.
func codeErr(c redisscript.Code) error {
	switch c {
	case redisscript.UnknownBucket:
		return ErrUnknownBucket
	case redisscript.AppNotAllowed:
		return ErrAppNotAllowed
	case redisscript.ExceedsCapacity:
		return ErrExceedsCapacity
	case redisscript.InvalidKey:
		return ErrInvalidKey
	}
	return ErrInvalidN
}

func requestErr(i int, r Request, err error) error {
	return fmt.Errorf("sluice: request %d (bucket %q): %w", i, r.Bucket, err)
}

// oneSlot returns ErrCrossSlot, naming two requests in different slots,
// when rdb is a Redis Cluster client and keys (AcquireAllArgs's, in request
// order) are not all in one hash slot. A plain bucket's slot is that of
// its name; a keyed request's is that of "<bucket>:<group>", its key's
// group, so it shares a slot with other requests only by chance.
func (l *Limiter) oneSlot(reqs []Request, keys []string) error {
	if sameSlot(l.rdb, keys) {
		return nil
	}
	first := keySlot(keys[0])
	k := 0
	for i, r := range reqs {
		if keySlot(keys[k]) != first {
			return fmt.Errorf("sluice: request %d (bucket %q%s) and request 0 (bucket %q%s) are in "+
				"different redis cluster hash slots, so one script cannot take from both; nothing was taken "+
				"(put such sets on a non-cluster Redis, see docs/decisions.md): %w",
				i, r.Bucket, keyNote(r), reqs[0].Bucket, keyNote(reqs[0]), ErrCrossSlot)
		}
		k++
		if r.Key != "" {
			k++
		}
	}
	return ErrCrossSlot
}

func keyNote(r Request) string {
	if r.Key == "" {
		return ""
	}
	return ", a key"
}
