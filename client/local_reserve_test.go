package client

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/redisscript"
)

// TestFailLocalReserve: FailLocal's local bucket keeps its share of the
// reserve for critical requests, and learns the reserve from a protocol 3
// answer, keeping it through answers that do not tell it (a lease's).
func TestFailLocalReserve(t *testing.T) {
	cfg := learnedOf(redisscript.Answer{Code: redisscript.Allowed, Capacity: 10, PermitsMicro: 1_000_000, PeriodSeconds: 1,
		HasShadow: true, HasReserve: true, Reserve: 4}, nil)
	if cfg.reserve != 4 {
		t.Fatalf("learned %+v", cfg)
	}
	if again := learnedOf(redisscript.Answer{Code: redisscript.Allowed, Capacity: 10, PermitsMicro: 1_000_000,
		PeriodSeconds: 1}, cfg); again != cfg {
		t.Fatalf("an answer without the reserve forgot it: %+v", again)
	}
	if share := localShare(cfg, 2); share.Capacity != 5 || share.Reserve != 2 {
		t.Fatalf("two instances: %+v, want 5 tokens and 2 kept", share)
	}
	b := &bucket{}
	const probe = time.Second
	// Two instances; the local bucket filled for 10 s at 0.5/s: full, 5.
	at := func(n int64, critical bool) (Result, error) {
		return b.localAt(cfg, 2, n, 10_000_000, 0, probe, critical)
	}
	if res, err := at(4, false); err != nil || res.Allowed {
		t.Fatalf("4 not critical, more than this share gives: %+v %v", res, err)
	}
	if res, err := at(3, false); err != nil || !res.Allowed || res.Remaining != 0 {
		t.Fatalf("3 not critical: %+v %v", res, err)
	}
	if res, err := at(1, false); err != nil || res.Allowed || res.Remaining != 0 || res.RetryAfter != 2*time.Second {
		t.Fatalf("a fourth not critical: %+v %v, want denied for 2 s (one token at 0.5/s)", res, err)
	}
	if res, err := at(2, true); err != nil || !res.Allowed || !res.Fallback {
		t.Fatalf("2 critical: %+v %v", res, err)
	}
	if _, err := at(7, false); !errors.Is(err, ErrExceedsCapacity) {
		t.Fatalf("7 not critical (10 - 4 = 6 in Redis): %v", err)
	}
}

// TestKeyedMergeCriticalFlags: keyed acquires merged into one call send
// the protocol and, when some are critical, one flag per acquire; answers
// of ten integers are handed back in order.
func TestKeyedMergeCriticalFlags(t *testing.T) {
	calls := make([]*call, 3)
	for i := range calls {
		c := getCall()
		c.args[0], c.args[1], c.args[2], c.args[3], c.args[4] = "evalsha", keyedScript.sha, "2", "group", "state"
		c.args[5], c.args[6], c.args[7], c.args[8] = "app", int64(i+1), "key", redisscript.ProtocolReserve
		c.nargs, c.src = 9, keyedScript.src
		if i == 1 {
			c.args[9], c.nargs = "1", 10
		}
		if !c.isKeyed() {
			t.Fatalf("call %d is not a keyed call", i)
		}
		calls[i] = c
	}
	m := getCall()
	m.batch = append(m.batch, calls...)
	m.buildKeyedMany("app")
	n := len(m.xargs)
	if n != 3+6+1+6+2 || m.xargs[n-2] != redisscript.ProtocolReserve || m.xargs[n-1] != "010" {
		t.Fatalf("merged command %v", m.xargs)
	}
	m.reply = make([]int64, 30)
	for i := range m.reply {
		m.reply[i] = int64(i / 10)
	}
	splitKeyed([]*call{m})
	for i, c := range calls {
		if c.err != nil || len(c.reply) != 10 || c.reply[0] != int64(i) {
			t.Errorf("call %d: %v %v", i, c.reply, c.err)
		}
	}
	// None critical: no flags.
	calls[1].args[9], calls[1].nargs = nil, 9
	m = getCall()
	m.batch = append(m.batch, calls...)
	m.buildKeyedMany("app")
	if last := m.xargs[len(m.xargs)-1]; last != redisscript.ProtocolReserve {
		t.Fatalf("merged command without critical acquires ends with %v", last)
	}
}
