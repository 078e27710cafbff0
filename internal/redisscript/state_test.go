package redisscript_test

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/redisscript/testenv"
)

// TestStateForms: every script that takes or gives tokens writes the state
// back in the form it found, and only apply moves a bucket from one form
// to the other, keeping its tokens and every other field, with the binary
// state first in the hash.
func TestStateForms(t *testing.T) {
	t.Parallel()
	rdb, prefix := testenv.Redis(t)
	ctx := context.Background()
	ks := redisscript.Keyspace{Prefix: prefix}
	// 1 a day refills a few millionths of a token a second.
	cfg := redisscript.Config{Name: "forms", ID: 1, Version: 1, Capacity: 20, PermitsMicro: 1_000_000,
		PeriodSeconds: 86400, Apps: []string{"svc"}, DecimalState: true, LeaseMillis: 100}
	form := func(want string, tokens float64) {
		t.Helper()
		h, err := rdb.HGetAll(ctx, ks.Bucket("forms")).Result()
		if err != nil {
			t.Fatal(err)
		}
		_, st := h[redisscript.FieldState]
		_, tok := h[redisscript.FieldTokens]
		_, ts := h[redisscript.FieldTS]
		if got := map[bool]string{true: "binary", false: "decimal"}[st]; got != want || tok != !st || ts != !st {
			t.Fatalf("state form %s (tokens %v, ts %v), want %s only", got, tok, ts, want)
		}
		got, _, ok, err := redisscript.ReadStored(ctx, rdb, ks, "forms")
		if err != nil || !ok || got < tokens || got > tokens+0.01 {
			t.Fatalf("state holds %v tokens (%v, %v), want %v", got, ok, err, tokens)
		}
		if s, err := redisscript.Read(ctx, rdb, ks, "forms"); err != nil || s.Config.DecimalState != (want == "decimal") ||
			s.Stored != got {
			t.Fatalf("Read: %+v, %v", s, err)
		}
	}
	apply := func(decimal bool, want redisscript.ApplyOutcome) {
		t.Helper()
		cfg.DecimalState = decimal
		if out, err := redisscript.Apply(ctx, rdb, ks, cfg, false); err != nil || out != want {
			t.Fatalf("apply (decimal %v): %v %v, want %v", decimal, out, err, want)
		}
	}
	take := func(name string, want float64) {
		t.Helper()
		var err error
		switch name {
		case "acquire":
			var a redisscript.Answer
			a, err = redisscript.Acquire(ctx, rdb, ks, "forms", "svc", 2)
			if a.Code != redisscript.Allowed {
				t.Fatalf("acquire: %+v", a)
			}
		case "refund":
			var a redisscript.AdjustAnswer
			a, err = redisscript.Adjust(ctx, rdb, ks, "forms", "svc", redisscript.Refund, 1)
			if a.Code != redisscript.Allowed {
				t.Fatalf("refund: %+v", a)
			}
		case "lease":
			var a redisscript.LeaseAnswer
			a, err = redisscript.Lease(ctx, rdb, ks, "forms", "svc", 3, 0)
			if a.Granted != 3 {
				t.Fatalf("lease: %+v", a)
			}
		case "acquire-all":
			var a redisscript.AllAnswer
			a, err = redisscript.AcquireAll(ctx, rdb, ks, "svc", []redisscript.Entry{{Bucket: "forms", N: 1}})
			if a.Code != redisscript.Allowed {
				t.Fatalf("acquire-all: %+v", a)
			}
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}

	apply(true, redisscript.Created)
	form("decimal", 20)
	tokens := 20.0
	steps := []struct {
		name string
		d    float64
	}{{"acquire", -2}, {"refund", 1}, {"lease", -3}, {"acquire-all", -1}}
	for _, s := range steps {
		tokens += s.d
		take(s.name, tokens)
		form("decimal", tokens)
	}
	// A field that apply does not write (a quota's count, say) survives a
	// move of the state's form.
	if err := rdb.HSet(ctx, ks.Bucket("forms"), "used", "7").Err(); err != nil {
		t.Fatal(err)
	}
	apply(false, redisscript.Updated)
	form("binary", tokens)
	apply(false, redisscript.Unchanged)
	if keys, err := rdb.HKeys(ctx, ks.Bucket("forms")).Result(); err != nil || keys[0] != redisscript.FieldState {
		t.Fatalf("fields %v (%v), want the binary state first", keys, err)
	}
	for _, s := range steps {
		tokens += s.d
		take(s.name, tokens)
		form("binary", tokens)
	}
	apply(true, redisscript.Updated)
	form("decimal", tokens)
	if v, err := rdb.HGet(ctx, ks.Bucket("forms"), "used").Result(); err != nil || v != "7" {
		t.Fatalf("used = %q (%v) after two moves, want 7", v, err)
	}
	take("acquire", tokens-2)
	form("decimal", tokens-2)
}

// TestEncodeStateMatchesLua: the binary state the Go side writes is the
// one the scripts read, and the other way round.
func TestEncodeStateMatchesLua(t *testing.T) {
	t.Parallel()
	rdb, prefix := testenv.Redis(t)
	ctx := context.Background()
	ks := redisscript.Keyspace{Prefix: prefix}
	cfg := redisscript.Config{Name: "enc", ID: 1, Version: 1, Capacity: 10, PermitsMicro: 1, PeriodSeconds: 86400,
		Apps: []string{"svc"}}
	if _, err := redisscript.Apply(ctx, rdb, ks, cfg, false); err != nil {
		t.Fatal(err)
	}
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	// 2.5 tokens an hour ahead: no refill, exact fractions.
	at := now.UnixMicro() + 3_600_000_000
	if err := rdb.HSet(ctx, ks.Bucket("enc"), redisscript.FieldState, redisscript.EncodeState(2.5, at)).Err(); err != nil {
		t.Fatal(err)
	}
	a, err := redisscript.Acquire(ctx, rdb, ks, "enc", "svc", 1)
	if err != nil || a.Code != redisscript.Allowed || a.Remaining != 1 {
		t.Fatalf("acquire: %+v %v, want allowed with 1 left", a, err)
	}
	tokens, ts, ok, err := redisscript.ReadStored(ctx, rdb, ks, "enc")
	if err != nil || !ok || tokens != 1.5 || ts != at {
		t.Fatalf("stored %v at %d (%v %v), want 1.5 at %d", tokens, ts, ok, err, at)
	}
}
