package usage_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/client/usage"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/redisscript/testenv"
	readusage "github.com/sluicehq/sluice/internal/usage"
)

// Denials of a keyed bucket are counted per key; the console's reader
// lists the most denied keys; the set stays trimmed however many keys
// there are.
func TestHotKeys(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	ks := redisscript.Keyspace{Prefix: prefix}
	ctx := context.Background()
	cfg := redisscript.Config{Name: "login", ID: 1, Version: 1, Capacity: 1, PermitsMicro: 1_000_000,
		PeriodSeconds: 3600, Apps: []string{"web"}}
	if _, err := redisscript.ApplyKeyed(ctx, rdb, ks, cfg, false); err != nil {
		t.Fatal(err)
	}
	rec, err := usage.NewRecorder(rdb, "web", usage.WithKeyPrefix(prefix), usage.WithFlushInterval(time.Hour),
		usage.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	l, err := client.New(rdb, "web", client.WithKeyPrefix(prefix), client.WithObserver(rec.Observe))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for key, calls := range map[string]int{"mallory": 6, "eve": 3, "alice": 1} {
		for range calls {
			l.AllowKey(ctx, "login", key)
		}
	}
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	hot, err := readusage.NewReader(rdb, ks).HotKeys(ctx, "login", 0)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(hot) != "[{mallory 5} {eve 2}]" {
		t.Fatalf("hot keys = %v; want mallory 5, eve 2 (alice was never denied)", hot)
	}

	// Many keys: the set keeps the most denied.
	hour := time.Now().Unix() / 3600
	for i := range redisscript.HotKeysKept + 200 {
		key := fmt.Sprintf("k%04d", i)
		l.AllowKey(ctx, "login", key)
		l.AllowKey(ctx, "login", key)
	}
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	n, err := rdb.ZCard(ctx, ks.HotKeys("login", hour)).Result()
	if err != nil || n > redisscript.HotKeysKept {
		t.Fatalf("hot-keys set holds %d, %v; want at most %d", n, err, redisscript.HotKeysKept)
	}
	hot, err = readusage.NewReader(rdb, ks).HotKeys(ctx, "login", 3)
	if err != nil || len(hot) != 3 || hot[0].Key != "mallory" {
		t.Fatalf("hot keys = %v, %v", hot, err)
	}
	if _, err := readusage.NewReader(rdb, ks).HotKeys(ctx, "Bad Name", 3); err == nil {
		t.Fatal("invalid bucket name accepted")
	}
}
