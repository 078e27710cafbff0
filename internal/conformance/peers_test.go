package conformance_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/sluicehq/sluice/internal/redisscript"
)

func (s server) acquireAll(t *testing.T, app string, entries ...redisscript.Entry) redisscript.AllAnswer {
	t.Helper()
	a, err := redisscript.AcquireAll(context.Background(), s.rdb, s.ks, app, entries)
	if err != nil {
		t.Fatalf("acquire all %v: %v", entries, err)
	}
	return a
}

func (s server) adjust(t *testing.T, name, app string, op redisscript.Op, n int64) redisscript.AdjustAnswer {
	t.Helper()
	a, err := redisscript.Adjust(context.Background(), s.rdb, s.ks, name, app, op, n)
	if err != nil {
		t.Fatalf("%s %s %d: %v", op, name, n, err)
	}
	return a
}

func (s server) tokens(t *testing.T, name string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s.fields(t, name)[redisscript.FieldTokens], 64)
	if err != nil {
		t.Fatalf("tokens of %s: %v", name, err)
	}
	return v
}

func entry(bucket string, n int64) redisscript.Entry { return redisscript.Entry{Bucket: bucket, N: n} }

func TestAcquireAllGrantsEveryOne(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		s.apply(t, cfg("a", 10, 1, 3600, "svc"), false) // slow refill: counts are exact
		s.apply(t, cfg("b", 5, 1, 3600, "svc"), false)
		a := s.acquireAll(t, "svc", entry("a", 3), entry("b", 2), entry("a", 4))
		if a.Code != redisscript.Allowed || len(a.Entries) != 3 {
			t.Fatalf("%+v", a)
		}
		if a.Entries[0].Remaining != 7 || a.Entries[1].Remaining != 3 || a.Entries[2].Remaining != 3 {
			t.Errorf("remaining per entry: %+v", a.Entries)
		}
		if a.Entries[1].Capacity != 5 || a.Entries[1].PeriodSeconds != 3600 {
			t.Errorf("config of b: %+v", a.Entries[1])
		}
		if got := s.tokens(t, "a"); got < 3 || got > 3.001 {
			t.Errorf("a holds %v tokens, want 3 (both entries taken)", got)
		}
		if got := s.tokens(t, "b"); got < 3 || got > 3.001 {
			t.Errorf("b holds %v tokens, want 3", got)
		}
	})
}

// The last bucket of the set denies: no bucket is charged (Q16).
func TestAcquireAllLastDeniesNoneCharged(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		s.apply(t, cfg("first", 10, 1, 3600, "svc"), false)
		s.apply(t, cfg("second", 10, 1, 3600, "svc"), false)
		s.apply(t, cfg("last", 10, 1_000_000, 1, "svc"), false)
		now := s.nowMicros(t)
		s.setState(t, "last", 1, now+3_600_000_000) // no refill during the test
		before := map[string]map[string]string{}
		for _, b := range []string{"first", "second", "last"} {
			before[b] = s.fields(t, b)
		}
		a := s.acquireAll(t, "svc", entry("first", 5), entry("second", 5), entry("last", 2))
		if a.Code != redisscript.Denied {
			t.Fatalf("want denied, got %+v", a)
		}
		if a.Entries[0].Code != redisscript.Allowed || a.Entries[2].Code != redisscript.Denied ||
			a.Entries[2].RetryAfterMicros != 1_000_000 || a.Entries[2].Remaining != 1 {
			t.Errorf("entries: %+v", a.Entries)
		}
		for _, b := range []string{"first", "second", "last"} {
			after := s.fields(t, b)
			if after[redisscript.FieldTokens] != before[b][redisscript.FieldTokens] || after[redisscript.FieldTS] != before[b][redisscript.FieldTS] {
				t.Errorf("%s was charged by a denied set: %v -> %v", b, before[b], after)
			}
		}
	})
}

func TestAcquireAllErrorsChargeNothing(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		s.apply(t, cfg("a", 10, 1, 3600, "svc"), false)
		s.apply(t, cfg("other", 10, 1, 3600, "billing"), false)
		s.acquireAll(t, "svc", entry("a", 1)) // write state once
		before := s.fields(t, "a")
		tests := []struct {
			name    string
			entries []redisscript.Entry
			want    redisscript.Code
			at      int
		}{
			{"unknown bucket", []redisscript.Entry{entry("a", 1), entry("nope", 1)}, redisscript.UnknownBucket, 1},
			{"app not allowed", []redisscript.Entry{entry("a", 1), entry("other", 1)}, redisscript.AppNotAllowed, 1},
			{"n over capacity", []redisscript.Entry{entry("a", 11)}, redisscript.ExceedsCapacity, 0},
			{"together over capacity", []redisscript.Entry{entry("a", 6), entry("a", 5)}, redisscript.ExceedsCapacity, 1},
			{"invalid n", []redisscript.Entry{entry("a", 1), entry("a", 0)}, redisscript.InvalidN, 1},
			{"first error wins", []redisscript.Entry{entry("nope", 1), entry("a", 0)}, redisscript.UnknownBucket, 0},
		}
		for _, tt := range tests {
			a := s.acquireAll(t, "svc", tt.entries...)
			if a.Code != tt.want || a.Entries[tt.at].Code != tt.want {
				t.Errorf("%s: %+v", tt.name, a)
			}
		}
		if after := s.fields(t, "a"); after[redisscript.FieldTokens] != before[redisscript.FieldTokens] {
			t.Errorf("a failed set charged a: %v -> %v", before, after)
		}
	})
}

func TestAcquireAllMalformedArguments(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		s.apply(t, cfg("a", 10, 1, 3600, "svc"), false)
		key := s.ks.Bucket("a")
		before := s.fields(t, "a")
		for _, tc := range []struct {
			name string
			keys []string
			argv []any
		}{
			{"no entries", nil, []any{"svc", "0"}},
			{"count mismatch", []string{key}, []any{"svc", "2", "b", "", "1"}},
			{"keys mismatch", []string{key, key}, []any{"svc", "1", "b", "", "1"}},
			{"unknown kind", []string{key}, []any{"svc", "1", "x", "", "1"}},
			{"keyed entry with one key", []string{key}, []any{"svc", "1", "k", "user-1", "1"}},
			{"key on a plain bucket", []string{key}, []any{"svc", "1", "b", "user-1", "1"}},
			{"too many", nil, []any{"svc", "33"}},
			{"count with sign", []string{key}, []any{"svc", "+1", "b", "", "1"}},
		} {
			v, err := s.rdb.Eval(context.Background(), redisscript.AcquireAllScript.Source(), tc.keys, tc.argv...).Int64Slice()
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if v[0] != int64(redisscript.InvalidN) {
				t.Errorf("%s: %v, want invalid", tc.name, v)
			}
		}
		if after := s.fields(t, "a"); after[redisscript.FieldTokens] != before[redisscript.FieldTokens] || after[redisscript.FieldTS] != before[redisscript.FieldTS] {
			t.Errorf("a malformed call wrote state: %v -> %v", before, after)
		}
	})
}

func TestRefundNeverAboveCapacity(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		s.apply(t, cfg("r", 10, 1, 3600, "svc"), false)
		s.acquire(t, "r", "svc", 6)
		if a := s.adjust(t, "r", "svc", redisscript.Refund, 4); a.Code != redisscript.Allowed || a.Remaining != 8 || a.Applied != 4 {
			t.Fatalf("refund 4 onto 4: %+v", a)
		}
		if a := s.adjust(t, "r", "svc", redisscript.Refund, 5); a.Remaining != 10 || a.Applied != 2 {
			t.Fatalf("refund past capacity: %+v", a)
		}
		if got := s.tokens(t, "r"); got != 10 {
			t.Errorf("tokens %v, want capacity 10", got)
		}
	})
}

func TestChargeDebtIsBoundedAndPaidByRefill(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		s.apply(t, cfg("c", 10, 1_000_000, 1, "svc"), false) // 1 per second
		now := s.nowMicros(t)
		s.setState(t, "c", 4, now+3_600_000_000) // frozen: no refill while the test runs
		a := s.adjust(t, "c", "svc", redisscript.Charge, 7)
		if a.Code != redisscript.Allowed || a.Remaining != -3 || a.Applied != 7 || a.ResetAfterMicros != 13_000_000 {
			t.Fatalf("charge 7 of 4: %+v", a)
		}
		// A plain acquire is denied while the bucket is in debt.
		if got := s.acquire(t, "c", "svc", 1); got.Code != redisscript.Denied {
			t.Fatalf("acquire in debt: %+v", got)
		}
		// The debt never goes below -capacity.
		if a := s.adjust(t, "c", "svc", redisscript.Charge, 100); a.Remaining != -10 || a.Applied != 7 {
			t.Fatalf("charge past the bound: %+v", a)
		}
		if got := s.tokens(t, "c"); got != -10 {
			t.Fatalf("tokens %v, want -10", got)
		}
		// 10.5 s of refill pays the debt and leaves half a token: still denied.
		s.setState(t, "c", -10, s.nowMicros(t)-10_500_000)
		if got := s.acquire(t, "c", "svc", 1); got.Code != redisscript.Denied {
			t.Fatalf("acquire with half a token: %+v", got)
		}
		// 12 s: the debt is paid and one token is there.
		s.setState(t, "c", -10, s.nowMicros(t)-12_000_000)
		if got := s.acquire(t, "c", "svc", 1); got.Code != redisscript.Allowed {
			t.Fatalf("acquire after the debt was paid: %+v", got)
		}
		// Charges and refunds answer the usual errors.
		if a := s.adjust(t, "nope", "svc", redisscript.Charge, 1); a.Code != redisscript.UnknownBucket {
			t.Errorf("unknown bucket: %+v", a)
		}
		if a := s.adjust(t, "c", "billing", redisscript.Refund, 1); a.Code != redisscript.AppNotAllowed {
			t.Errorf("app not allowed: %+v", a)
		}
	})
}

func TestAdjustInvalidArguments(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		s.apply(t, cfg("x", 10, 1, 3600, "svc"), false)
		key := []string{s.ks.Bucket("x")}
		before := s.fields(t, "x")
		for _, argv := range [][]any{
			{"svc", "refund", "0"}, {"svc", "charge", "-1"}, {"svc", "reserve", "1.5"}, {"svc", "give", "1"},
			{"svc", "refund", "1000000001"}, {"svc", "charge", "1e3"}, {"svc", "refund"},
		} {
			v, err := s.rdb.Eval(context.Background(), redisscript.AdjustScript.Source(), key, argv...).Int64Slice()
			if err != nil {
				t.Fatalf("%v: %v", argv, err)
			}
			if v[0] != int64(redisscript.InvalidN) {
				t.Errorf("%v: %v, want invalid", argv, v)
			}
		}
		if after := s.fields(t, "x"); after[redisscript.FieldTokens] != before[redisscript.FieldTokens] || after[redisscript.FieldTS] != before[redisscript.FieldTS] {
			t.Errorf("an invalid adjust wrote state: %v -> %v", before, after)
		}
	})
}

func TestReserveGoesIntoBoundedDebt(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		s.apply(t, cfg("q", 10, 2_000_000, 1, "svc"), false) // 2 per second
		s.setState(t, "q", 4, s.nowMicros(t)+3_600_000_000)
		// Enough tokens: no wait.
		if a := s.adjust(t, "q", "svc", redisscript.Reserve, 3); a.Code != redisscript.Allowed || a.RetryAfterMicros != 0 || a.Remaining != 1 {
			t.Fatalf("reserve 3 of 4: %+v", a)
		}
		// Into debt: wait until it is paid, 5 tokens at 2/s.
		if a := s.adjust(t, "q", "svc", redisscript.Reserve, 6); a.Code != redisscript.Allowed || a.RetryAfterMicros != 2_500_000 || a.Remaining != -5 {
			t.Fatalf("reserve 6 of 1: %+v", a)
		}
		// Past -capacity: denied, nothing taken; it fits after 3 tokens refill.
		if a := s.adjust(t, "q", "svc", redisscript.Reserve, 8); a.Code != redisscript.Denied || a.RetryAfterMicros != 1_500_000 || a.Applied != 0 {
			t.Fatalf("reserve past the bound: %+v", a)
		}
		if got := s.tokens(t, "q"); got != -5 {
			t.Fatalf("tokens %v, want -5", got)
		}
		if a := s.adjust(t, "q", "svc", redisscript.Reserve, 11); a.Code != redisscript.ExceedsCapacity {
			t.Errorf("reserve over capacity: %+v", a)
		}
		// Cancelling is a refund.
		if a := s.adjust(t, "q", "svc", redisscript.Refund, 6); a.Remaining != 1 {
			t.Errorf("cancel: %+v", a)
		}
	})
}

// A bucket in shadow mode never holds back a set: an entry it would deny
// answers WouldDeny and takes nothing; the other buckets are charged.
func TestAcquireAllShadowBucket(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		s.apply(t, cfg("real", 10, 1, 3600, "svc"), false)
		s.apply(t, cfg("trial", 10, 1_000_000, 1, "svc"), false)
		if err := s.rdb.HSet(context.Background(), s.ks.Bucket("trial"), redisscript.FieldShadow, "1").Err(); err != nil {
			t.Fatal(err)
		}
		s.setState(t, "trial", 2, s.nowMicros(t)+3_600_000_000)
		a := s.acquireAll(t, "svc", entry("real", 3), entry("trial", 5))
		if a.Code != redisscript.Allowed || a.Entries[0].Code != redisscript.Allowed ||
			a.Entries[1].Code != redisscript.WouldDeny || a.Entries[1].RetryAfterMicros != 3_000_000 || a.Entries[1].Remaining != 2 {
			t.Fatalf("%+v", a)
		}
		if got := s.tokens(t, "real"); got < 7 || got > 7.001 {
			t.Errorf("real holds %v, want 7", got)
		}
		if got := s.tokens(t, "trial"); got != 2 {
			t.Errorf("trial holds %v, want 2: a would-deny took tokens", got)
		}
		// Without shadow mode the same set is denied.
		if err := s.rdb.HSet(context.Background(), s.ks.Bucket("trial"), redisscript.FieldShadow, "0").Err(); err != nil {
			t.Fatal(err)
		}
		if a := s.acquireAll(t, "svc", entry("real", 3), entry("trial", 5)); a.Code != redisscript.Denied {
			t.Fatalf("shadow off: %+v", a)
		}
	})
}

func TestAnswerOfWouldDeny(t *testing.T) {
	a, err := redisscript.AnswerOf([]int64{2, 1, 500, 900, 10, 1_000_000, 1})
	if err != nil || a.Code != redisscript.WouldDeny || a.RetryAfterMicros != 500 {
		t.Fatalf("%+v %v", a, err)
	}
	if _, err := redisscript.AnswerOf([]int64{3, 0, 0, 0, 0, 0, 0}); err == nil {
		t.Error("code 3 accepted")
	}
}
