package redisscript_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/redisscript/testenv"
)

func TestKeyspace(t *testing.T) {
	t.Parallel()
	var zero redisscript.Keyspace
	if got := zero.Bucket("orders-api"); got != "sluice:{orders-api}" {
		t.Errorf("Bucket = %q", got)
	}
	if got := zero.Tombstone("orders-api"); got != "sluice:{orders-api}:deleted" {
		t.Errorf("Tombstone = %q", got)
	}
	if got := zero.Pattern(); got != "sluice:{*}" {
		t.Errorf("Pattern = %q", got)
	}
	ks := redisscript.Keyspace{Prefix: "t[1]*?:"}
	if got := ks.Pattern(); got != `t\[1\]\*\?:{*}` {
		t.Errorf("escaped Pattern = %q", got)
	}
	for key, want := range map[string]string{
		"sluice:{orders-api}": "orders-api", "sluice:{a}": "a",
		"sluice:{orders-api}:deleted": "", "sluice:{}": "", "other:{a}": "", "sluice:{A}": "", "sluice:a": "",
		"sluice:{a}b}": "", "sluice:{a{b}": "",
	} {
		got, ok := zero.NameOf(key)
		if got != want || ok != (want != "") {
			t.Errorf("NameOf(%q) = %q, %v; want %q", key, got, ok, want)
		}
	}
}

func TestPermits(t *testing.T) {
	t.Parallel()
	for micro, s := range map[int64]string{
		500_000: "0.5", 100_000_000: "100", 1_000_001: "1.000001", 1: "0.000001", 0: "0", 10_000: "0.01",
		redisscript.MaxPermitsMicro: "1000000000", 123_456_789: "123.456789",
	} {
		if got := redisscript.FormatPermits(micro); got != s {
			t.Errorf("FormatPermits(%d) = %q, want %q", micro, got, s)
		}
		if got, err := redisscript.ParsePermits(s); err != nil || got != micro {
			t.Errorf("ParsePermits(%q) = %d, %v", s, got, err)
		}
	}
	for _, bad := range []string{"", ".", "1.", ".5", "-1", "+1", "1e3", "0.0000001", "1,5", "abc", "1.2.3", " 1", "nan",
		"99999999999"} {
		if _, err := redisscript.ParsePermits(bad); err == nil {
			t.Errorf("ParsePermits(%q) accepted", bad)
		}
	}
}

func FuzzPermits(f *testing.F) {
	for _, s := range []string{"0.5", "100", "1.000001", "1e3", "-1", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		micro, err := redisscript.ParsePermits(s)
		if err != nil {
			return
		}
		back, err := redisscript.ParsePermits(redisscript.FormatPermits(micro))
		if err != nil || back != micro {
			t.Fatalf("%q -> %d -> %q -> %d, %v", s, micro, redisscript.FormatPermits(micro), back, err)
		}
	})
}

func TestAnswerOf(t *testing.T) {
	t.Parallel()
	a, err := redisscript.AnswerOf([]int64{1, 5, 0, 2_500_000, 10, 500_000, 1})
	want := redisscript.Answer{Code: redisscript.Allowed, Remaining: 5, ResetAfterMicros: 2_500_000, Capacity: 10, PermitsMicro: 500_000, PeriodSeconds: 1}
	if err != nil || a != want {
		t.Fatalf("got %+v, %v", a, err)
	}
	// Protocol 2: the lease time, then shadow mode.
	a, err = redisscript.AnswerOf([]int64{2, 5, 0, 2_500_000, 10, 500_000, 1, 0, 1})
	if err != nil || !a.HasShadow || !a.Shadow || a.Code != redisscript.WouldDeny {
		t.Fatalf("protocol 2: got %+v, %v", a, err)
	}
	// Protocol 3: and the reserve.
	a, err = redisscript.AnswerOf([]int64{0, 0, 7, 2_500_000, 10, 500_000, 1, 0, 0, 4})
	if err != nil || !a.HasShadow || a.Shadow || !a.HasReserve || a.Reserve != 4 || a.Code != redisscript.Denied {
		t.Fatalf("protocol 3: got %+v, %v", a, err)
	}
	for _, bad := range [][]int64{nil, {1}, {1, 2, 3, 4, 5, 6}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {3, 0, 0, 0, 0, 0, 0}, {-5, 0, 0, 0, 0, 0, 0}} {
		if _, err := redisscript.AnswerOf(bad); !errors.Is(err, redisscript.ErrBadAnswer) {
			t.Errorf("AnswerOf(%v) err = %v", bad, err)
		}
	}
}

// TestFieldsDocumented keeps the scripts and docs/protocol.md in step with
// the Go names.
func TestFieldsDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{redisscript.FieldID, redisscript.FieldVersion, redisscript.FieldCapacity,
		redisscript.FieldPermits, redisscript.FieldPeriod, redisscript.FieldApps, redisscript.FieldTokens, redisscript.FieldTS,
		redisscript.FieldLeaseMillis, redisscript.FieldShadow, redisscript.FieldReserve, redisscript.FieldPacked, redisscript.FieldState} {
		if !strings.Contains(redisscript.AcquireScript.Source()+applySource(t), "'"+f+"'") {
			t.Errorf("field %q is not used by the scripts", f)
		}
		if !strings.Contains(string(doc), "`"+f+"`") {
			t.Errorf("field %q is not in docs/protocol.md", f)
		}
	}
}

func applySource(t *testing.T) string {
	b, err := os.ReadFile("apply.lua")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestProtocolDoc keeps docs/protocol.md from going stale: the SHA1 it
// gives is the embedded acquire script's, the path it gives holds that
// script, and it names the sync marker key.
func TestProtocolDoc(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	want := redisscript.AcquireScript.SHA()
	if sum := sha1.Sum([]byte(redisscript.AcquireScript.Source())); hex.EncodeToString(sum[:]) != want {
		t.Fatalf("AcquireScript.SHA() %s is not the SHA1 of the source", want)
	}
	m := regexp.MustCompile("(?m)^SHA1: `([0-9a-f]{40})`$").FindAllSubmatch(doc, -1)
	if len(m) != 1 {
		t.Fatalf("docs/protocol.md needs exactly one line \"SHA1: `%s`\"; found %d", want, len(m))
	}
	if got := string(m[0][1]); got != want {
		t.Errorf("docs/protocol.md gives the acquire script's SHA1 as %s, but it is %s: "+
			"update the line to \"SHA1: `%s`\"", got, want, want)
	}
	p := regexp.MustCompile("Source: \\[`([^`]+)`\\]").FindSubmatch(doc)
	if p == nil {
		t.Fatal("docs/protocol.md does not give the acquire script's path (\"Source: [`path`]\")")
	}
	src, err := os.ReadFile(filepath.Join("..", "..", string(p[1])))
	if err != nil {
		t.Fatalf("the acquire script's path in docs/protocol.md: %v", err)
	}
	if string(src) != redisscript.AcquireScript.Source() {
		t.Errorf("%s in docs/protocol.md is not the embedded acquire script", p[1])
	}
	var ks redisscript.Keyspace
	if got := ks.SyncMarker(); got != "sluice:sync:marker" {
		t.Errorf("SyncMarker = %q", got)
	}
	if !strings.Contains(string(doc), "`<prefix>sync:marker`") {
		t.Error("docs/protocol.md does not name the sync marker key")
	}
}

// TestScriptLoadSHA: Redis names the script by the SHA1 the doc gives.
func TestScriptLoadSHA(t *testing.T) {
	t.Parallel()
	rdb, _ := testenv.Redis(t)
	sha, err := rdb.ScriptLoad(context.Background(), redisscript.AcquireScript.Source()).Result()
	if err != nil || sha != redisscript.AcquireScript.SHA() {
		t.Fatalf("SCRIPT LOAD = %s, %v; want %s", sha, err, redisscript.AcquireScript.SHA())
	}
}

// ApplyMany answers for each config what Apply would, in one pipeline: an
// invalid config fails only itself, and the script is sent again (EVAL)
// to a server that does not know it.
func TestApplyMany(t *testing.T) {
	t.Parallel()
	srv := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	ctx := context.Background()
	var ks redisscript.Keyspace
	cfg := func(name string, id, version, capacity int64) redisscript.Config {
		return redisscript.Config{Name: name, ID: id, Version: version, Capacity: capacity, PermitsMicro: 1_000_000,
			PeriodSeconds: 1, Apps: []string{"app"}}
	}
	if _, err := redisscript.Apply(ctx, rdb, ks, cfg("newer", 5, 3, 1), false); err != nil {
		t.Fatal(err)
	}
	if _, err := redisscript.Delete(ctx, rdb, ks, "deleted", 2, 2); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	cfgs := []redisscript.Config{
		cfg("a", 1, 1, 10),
		cfg("a", 1, 1, 10),    // the same again
		cfg("a", 1, 2, 20),    // a new version
		cfg("newer", 5, 2, 1), // older than what is there
		cfg("deleted", 2, 1, 1),
		cfg("bad", 0, 1, 1), // no id
	}
	outs, errs := redisscript.ApplyMany(ctx, rdb, ks, cfgs, false)
	want := []redisscript.ApplyOutcome{redisscript.Created, redisscript.Unchanged, redisscript.Updated,
		redisscript.Stale, redisscript.Tombstoned, 0}
	for i := range cfgs {
		if i == len(cfgs)-1 {
			if !errors.Is(errs[i], redisscript.ErrInvalidConfig) {
				t.Errorf("invalid config: %v, want ErrInvalidConfig", errs[i])
			}
			continue
		}
		if errs[i] != nil || outs[i] != want[i] {
			t.Errorf("config %d (%+v): %v %v, want %v", i, cfgs[i], outs[i], errs[i], want[i])
		}
	}
	st, err := redisscript.Read(ctx, rdb, ks, "a")
	if err != nil || st.Config.Version != 2 || st.Config.Capacity != 20 {
		t.Fatalf("a: %+v %v", st.Config, err)
	}
	if outs, errs := redisscript.ApplyMany(ctx, rdb, ks, nil, false); len(outs) != 0 || len(errs) != 0 {
		t.Fatalf("no configs: %v %v", outs, errs)
	}
}
