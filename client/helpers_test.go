package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/redisscript/testenv"
)

// env is a Redis key space of one test with helpers to define buckets the
// way the sync worker does.
type env struct {
	rdb    redis.UniversalClient
	prefix string
}

func sharedRedis(t testing.TB) env {
	t.Helper()
	rdb, prefix := testenv.Redis(t)
	return env{rdb: rdb, prefix: prefix}
}

// privateRedis starts a redis-server of the test's own, for tests that
// pause, kill or flush it.
func privateRedis(t testing.TB) (env, *testenv.RedisServer) {
	t.Helper()
	srv := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { rdb.Close() })
	return env{rdb: rdb, prefix: "sluice:"}, srv
}

func (e env) ks() redisscript.Keyspace { return redisscript.Keyspace{Prefix: e.prefix} }

// define creates (or replaces with a new id) bucket name: capacity tokens,
// permitsMicro/1e6 permits per period seconds, for apps.
func (e env) define(t testing.TB, name string, capacity, permitsMicro, period int64, apps ...string) {
	t.Helper()
	ctx := context.Background()
	st, err := redisscript.Read(ctx, e.rdb, e.ks(), name)
	if err != nil {
		t.Fatal(err)
	}
	cfg := redisscript.Config{Name: name, ID: st.Config.ID + 1, Version: 1, Capacity: capacity,
		PermitsMicro: permitsMicro, PeriodSeconds: period, Apps: apps}
	if out, err := redisscript.Apply(ctx, e.rdb, e.ks(), cfg, false); err != nil || out != redisscript.Created {
		t.Fatalf("define %s: %v %v", name, out, err)
	}
}

// limiter returns a Limiter of app with a timeout of 2 s unless opts set
// one: a call that misses the 50 ms default on a saturated machine gets
// the policy's answer, which tests of Redis's answers must not see. Tests
// of timeouts and outages pass their own.
func (e env) limiter(t testing.TB, app string, opts ...client.Option) *client.Limiter {
	t.Helper()
	l, err := client.New(e.rdb, app, append([]client.Option{client.WithKeyPrefix(e.prefix),
		client.WithTimeout(2 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// eventually polls cond every millisecond until it holds or d passes, and
// reports whether it held.
func eventually(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}
