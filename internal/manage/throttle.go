package manage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/redisscript"
)

// Sign-in throttle: each user name and each client address may try
// SignInAttempts times per SignInWindow. Tokens refill continuously, so one
// more attempt is possible every SignInWindow/SignInAttempts.
const (
	SignInAttempts = 5
	SignInWindow   = 5 * time.Minute
	// throttleApp is the app the console takes throttle tokens as.
	throttleApp = "sluice-console"
	// throttleTTL removes the bucket of a name or address not seen for a
	// while; by then it would be full again anyway.
	throttleTTL = 2 * SignInWindow
)

// throttle limits sign-in attempts through Sluice's own token buckets,
// kept under a key prefix of their own so that the sync worker neither
// sees nor removes them. When Redis does not answer, an in-process limiter
// with the same rate takes over: sign-in keeps working and stays
// throttled per console process.
type throttle struct {
	rdb     redis.UniversalClient
	ks      redisscript.Keyspace
	limiter *client.Limiter
	log     *slog.Logger

	mu    sync.Mutex
	local map[string]*rate.Limiter
}

func newThrottle(rdb redis.UniversalClient, prefix string, log *slog.Logger) *throttle {
	t := &throttle{rdb: rdb, ks: redisscript.Keyspace{Prefix: prefix}, log: log, local: map[string]*rate.Limiter{}}
	if rdb != nil {
		l, err := client.New(rdb, throttleApp, client.WithKeyPrefix(prefix),
			client.WithFailurePolicy(client.FailClosed), client.WithTimeout(300*time.Millisecond),
			client.WithLogger(log))
		if err != nil {
			log.Error("sign-in throttle uses in-process limits only", "err", err)
		} else {
			t.limiter = l
		}
	}
	return t
}

// bucketName derives a valid bucket name from any user name or address:
// hashing keeps odd characters out of Redis keys and Casbin-safe names.
func bucketName(kind, key string) string {
	sum := sha256.Sum256([]byte(kind + "\x00" + key))
	return "login-" + kind + "-" + hex.EncodeToString(sum[:16])
}

// allow takes one attempt for each key (the address first, then the user
// name) and reports whether all were granted, and if not, how long until
// the next attempt may succeed. A refused key spends nothing of the
// following ones.
func (t *throttle) allow(ctx context.Context, addr, user string) (bool, time.Duration) {
	for _, k := range []struct{ kind, key string }{{"addr", addr}, {"user", strings.ToLower(strings.TrimSpace(user))}} {
		ok, wait := t.take(ctx, bucketName(k.kind, k.key))
		if !ok {
			return false, wait
		}
	}
	return true, 0
}

func (t *throttle) take(ctx context.Context, name string) (bool, time.Duration) {
	if t.limiter != nil {
		ok, wait, err := t.takeRedis(ctx, name)
		if err == nil {
			return ok, wait
		}
		t.log.WarnContext(ctx, "sign-in throttle falls back to in-process limits", "err", err)
	}
	return t.takeLocal(name)
}

func (t *throttle) takeRedis(ctx context.Context, name string) (bool, time.Duration, error) {
	cfg := redisscript.Config{Name: name, ID: 1, Version: 1, Capacity: SignInAttempts,
		PermitsMicro: SignInAttempts * 1_000_000, PeriodSeconds: int64(SignInWindow / time.Second),
		Apps: []string{throttleApp}}
	if _, err := redisscript.Apply(ctx, t.rdb, t.ks, cfg, false); err != nil {
		return false, 0, err
	}
	if err := t.rdb.Expire(ctx, t.ks.Bucket(name), throttleTTL).Err(); err != nil {
		return false, 0, err
	}
	res, err := t.limiter.Acquire(ctx, name, 1)
	if err != nil {
		if errors.Is(err, client.ErrUnknownBucket) {
			// Expired between the apply and the acquire: the bucket
			// would have been full.
			return true, 0, nil
		}
		return false, 0, err
	}
	return res.Allowed, res.RetryAfter, nil
}

// maxLocal bounds the in-process limiters kept during a Redis outage.
const maxLocal = 10_000

func (t *throttle) takeLocal(name string) (bool, time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.local[name]
	if l == nil {
		if len(t.local) >= maxLocal {
			clear(t.local)
		}
		l = rate.NewLimiter(rate.Every(SignInWindow/SignInAttempts), SignInAttempts)
		t.local[name] = l
	}
	r := l.Reserve()
	if d := r.Delay(); d > 0 {
		r.Cancel()
		return false, d
	}
	return true, 0
}

// close stops the limiter's background probe.
func (t *throttle) close() {
	if t.limiter != nil {
		_ = t.limiter.Close()
	}
}
