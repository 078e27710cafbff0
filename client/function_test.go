package client_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/redisscript"
)

// commandStats returns a field (calls, failed_calls, rejected_calls) of a
// command in INFO commandstats; 0 when Redis never saw the command.
func commandStats(t testing.TB, rdb redis.UniversalClient, cmd, field string) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":")
		if !ok {
			continue
		}
		for kv := range strings.SplitSeq(rest, ",") {
			if v, ok := strings.CutPrefix(kv, field+"="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
		}
	}
	return 0
}

// noFunctions returns a private Redis whose client may do anything but
// load functions, as under an ACL that leaves FUNCTION out: acquires run
// as scripts.
func noFunctions(t testing.TB) env {
	t.Helper()
	e, srv := privateRedis(t)
	ctx := context.Background()
	if err := e.rdb.Do(ctx, "acl", "setuser", "nofn", "on", ">nofn", "~*", "+@all", "-function").Err(); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: "nofn", Password: "nofn"})
	t.Cleanup(func() { rdb.Close() })
	return env{rdb: rdb, prefix: e.prefix}
}

// libraryLoaded reports whether Redis has the acquire function's library.
func libraryLoaded(t testing.TB, rdb redis.UniversalClient) bool {
	t.Helper()
	libs, err := rdb.FunctionList(context.Background(), redis.FunctionListQuery{}).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, lib := range libs {
		for _, f := range lib.Functions {
			if f.Name == redisscript.Functions.Function(redisscript.AcquireScript) {
				return true
			}
		}
	}
	return false
}

// awaitFunction acquires one token from bucket until Redis counts the
// acquire as an FCALL: New loads the function in the background.
func awaitFunction(t *testing.T, e env, l *client.Limiter, bucket string) {
	t.Helper()
	ctx := context.Background()
	if !eventually(10*time.Second, func() bool {
		before := commandStats(t, e.rdb, "fcall", "calls")
		if res, err := l.Acquire(ctx, bucket, 1); err != nil || !res.Allowed || res.Fallback {
			t.Fatalf("acquire: %+v %v", res, err)
		}
		return commandStats(t, e.rdb, "fcall", "calls") == before+1
	}) {
		t.Fatal("acquires never ran as FCALL")
	}
}

// The plain acquire runs as the Redis function once New loaded it, every
// acquire one FCALL, and answers as the script does: the same tokens
// taken, the same Results.
func TestAcquireUsesFunction(t *testing.T) {
	t.Parallel()
	e, _ := privateRedis(t)
	e.define(t, "warm", 1_000_000, 1, 86400, "svc")
	// Two buckets alike, a token a day: nothing refills while the test runs.
	e.define(t, "fn", 10, 1, 86400, "svc")
	e.define(t, "script", 10, 1, 86400, "svc")
	l := e.limiter(t, "svc", client.WithFailurePolicy(client.FailClosed), quiet())
	awaitFunction(t, e, l, "warm")
	if !libraryLoaded(t, e.rdb) {
		t.Fatal("the library is not in FUNCTION LIST")
	}
	ctx := context.Background()
	// The same calls on the other bucket as EVALSHA, which this test sends
	// itself.
	script := func(n int64) redisscript.Answer {
		v, err := redisscript.AcquireScript.Run(ctx, e.rdb, []string{e.ks().Bucket("script")}, "svc", n,
			redisscript.ProtocolReserve).Int64Slice()
		if err != nil {
			t.Fatal(err)
		}
		a, err := redisscript.AnswerOf(v)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	fcalls := commandStats(t, e.rdb, "fcall", "calls")
	// Grants, one above capacity, the last tokens, a denial.
	ns := []int64{2, 3, 11, 5, 1}
	for _, n := range ns {
		got, err := l.Acquire(ctx, "fn", n)
		want := script(n)
		switch want.Code {
		case redisscript.Allowed, redisscript.Denied:
			if err != nil || got.Fallback || got.Allowed != (want.Code == redisscript.Allowed) ||
				got.Remaining != want.Remaining || got.Limit != want.Capacity || (got.RetryAfter > 0) != (want.RetryAfterMicros > 0) {
				t.Fatalf("acquire %d: %+v %v, the script answered %+v", n, got, err, want)
			}
		case redisscript.ExceedsCapacity:
			if !errors.Is(err, client.ErrExceedsCapacity) || got.Limit != want.Capacity {
				t.Fatalf("acquire %d: %+v %v, the script answered %+v", n, got, err, want)
			}
		default:
			t.Fatalf("the script answered %+v", want)
		}
	}
	if got := commandStats(t, e.rdb, "fcall", "calls") - fcalls; got != int64(len(ns)) {
		t.Fatalf("%d FCALLs for %d acquires", got, len(ns))
	}
	if f := commandStats(t, e.rdb, "fcall", "failed_calls"); f != 0 {
		t.Fatalf("%d FCALLs failed", f)
	}
}

// FUNCTION FLUSH (or a restart without persistence) takes the function
// away while acquires run as FCALL: each call answered "Function not
// found" is resent as EVAL, so none fails or falls back and the breaker
// stays closed, and the library is loaded again, after which acquires
// run as FCALL again.
func TestFunctionFlushedFallsBack(t *testing.T) {
	t.Parallel()
	e, _ := privateRedis(t)
	e.define(t, "warm", 1_000_000, 1, 86400, "svc")
	e.define(t, "flush", 1_000_000, 1, 86400, "svc")
	var logs logBuffer
	l := e.limiter(t, "svc", client.WithFailurePolicy(client.FailClosed),
		client.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	awaitFunction(t, e, l, "warm")
	ctx := context.Background()
	for round := range 3 {
		if err := e.rdb.FunctionFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		failed := commandStats(t, e.rdb, "fcall", "failed_calls")
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() {
				res, err := l.Acquire(ctx, "flush", 1)
				if err != nil || !res.Allowed || res.Fallback {
					t.Errorf("round %d: %+v %v", round, res, err)
				}
			})
		}
		wg.Wait()
		if commandStats(t, e.rdb, "fcall", "failed_calls") == failed {
			t.Fatalf("round %d: no FCALL met the flushed function", round)
		}
		if !eventually(10*time.Second, func() bool { return libraryLoaded(t, e.rdb) }) {
			t.Fatalf("round %d: the library was not loaded again", round)
		}
		awaitFunction(t, e, l, "warm")
	}
	st, err := redisscript.Read(ctx, e.rdb, e.ks(), "flush")
	if err != nil {
		t.Fatal(err)
	}
	if st.Stored != 1_000_000-150 {
		t.Fatalf("tokens %v, want %v: an acquire ran twice or not at all", st.Stored, 1_000_000-150)
	}
	if s := l.Stats(); s.BreakerOpenings != 0 || s.Fallback != 0 {
		t.Fatalf("stats %+v: Redis counted as down", s)
	}
	if logs.String() != "" {
		t.Errorf("logged: %s", logs.String())
	}
}

// Where functions cannot be loaded (an ACL without FUNCTION here; an older
// Redis likewise refuses the command), acquires run as EVALSHA, and the
// refusal is logged once at debug level.
func TestNoFunctionsKeepsEvalsha(t *testing.T) {
	t.Parallel()
	e := noFunctions(t)
	e.define(t, "nofn", 1_000_000, 1, 86400, "svc")
	var logs logBuffer
	l := e.limiter(t, "svc", client.WithFailurePolicy(client.FailClosed),
		client.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	ctx := context.Background()
	// Until Redis refused the load, then after.
	const after = 100
	acquired := 0
	acquire := func() {
		res, err := l.Acquire(ctx, "nofn", 1)
		if err != nil || !res.Allowed || res.Fallback {
			t.Fatalf("acquire: %+v %v", res, err)
		}
		acquired++
	}
	if !eventually(10*time.Second, func() bool {
		acquire()
		return commandStats(t, e.rdb, "function|load", "rejected_calls") == 1
	}) {
		t.Fatal("the Limiter never tried to load the function")
	}
	evalshas := commandStats(t, e.rdb, "evalsha", "calls")
	for range after {
		acquire()
	}
	// The state the load leaves is stored just after the reply: the first
	// acquires after it may still see the load in flight; either way they
	// run as EVALSHA.
	if got := commandStats(t, e.rdb, "evalsha", "calls") - evalshas; got != after {
		t.Fatalf("%d EVALSHAs for %d acquires", got, after)
	}
	if n := commandStats(t, e.rdb, "fcall", "calls"); n != 0 {
		t.Fatalf("%d FCALLs", n)
	}
	if n := commandStats(t, e.rdb, "function|load", "rejected_calls"); n != 1 {
		t.Fatalf("%d loads refused, want 1", n)
	}
	st, err := redisscript.Read(ctx, e.rdb, e.ks(), "nofn")
	if err != nil {
		t.Fatal(err)
	}
	if st.Stored != float64(1_000_000-acquired) {
		t.Fatalf("tokens %v after %d acquires", st.Stored, acquired)
	}
	if !eventually(10*time.Second, func() bool { return strings.Count(logs.String(), "functions unavailable") == 1 }) {
		t.Fatalf("the refusal was not logged once: %s", logs.String())
	}
}

// logBuffer collects a Limiter's log lines, which it writes from its
// goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Every token call runs as the function of its script once the library is
// loaded: keyed acquires, several buckets at once, refunds, slot takes and
// releases, leases each add FCALLs and no EVALSHA.
func TestEveryCallUsesFunction(t *testing.T) {
	t.Parallel()
	e, _ := privateRedis(t)
	e.define(t, "warm", 1_000_000, 1, 86400, "svc")
	e.define(t, "plain", 100, 1, 86400, "svc")
	e.defineKeyed(t, "keyed", 100, 1, 86400, "svc")
	e.defineSlots(t, "slots", 10, time.Minute, "svc")
	e.defineLeased(t, "leased", 100, 1, 86400, 100, "svc")
	l := e.limiter(t, "svc", client.WithFailurePolicy(client.FailClosed), quiet())
	awaitFunction(t, e, l, "warm")
	ctx := context.Background()
	evalshas := commandStats(t, e.rdb, "evalsha", "calls") + commandStats(t, e.rdb, "eval", "calls")
	calls := []struct {
		name string
		run  func() error
	}{
		{"keyed acquire", func() error { _, err := l.AcquireKey(ctx, "keyed", "user-1", 1); return err }},
		{"acquire all", func() error {
			_, err := l.AcquireAll(ctx, []client.Request{{Bucket: "plain", N: 1}, {Bucket: "keyed", Key: "u", N: 1}})
			return err
		}},
		{"refund", func() error { _, err := l.Refund(ctx, "plain", 1); return err }},
		{"slot take and release", func() error {
			s, err := l.TakeSlot(ctx, "slots")
			if err != nil {
				return err
			}
			_, err = s.Release(ctx)
			return err
		}},
		{"lease", func() error { _, err := l.Acquire(ctx, "leased", 1); return err }},
	}
	for _, c := range calls {
		before := commandStats(t, e.rdb, "fcall", "calls")
		if err := c.run(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if commandStats(t, e.rdb, "fcall", "calls") == before {
			t.Errorf("%s sent no FCALL", c.name)
		}
	}
	if n := commandStats(t, e.rdb, "evalsha", "calls") + commandStats(t, e.rdb, "eval", "calls"); n != evalshas {
		t.Errorf("%d scripts sent beside the functions", n-evalshas)
	}
	if f := commandStats(t, e.rdb, "fcall", "failed_calls"); f != 0 {
		t.Errorf("%d FCALLs failed", f)
	}
}
