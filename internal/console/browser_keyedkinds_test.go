package console

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/internal/redisscript"
)

// TestBrowserKeyLookupByKind: looking up a key of a keyed concurrency
// limit shows its slots in use and first expiry, of a keyed quota its
// count this period and reset, never tokens; the per-key part says each
// kind's default limit; at 1280 and 400 px without sideways scrolling.
func TestBrowserKeyLookupByKind(t *testing.T) {
	e := newEnv(t)
	e.user("olga", false)
	e.app("shop", "olga")
	slots := e.keyedSlots("shop-exports", "shop")
	q := e.keyedQuota("shop-api", "shop")
	ctx := context.Background()
	for _, id := range []string{"a", "b"} {
		if a, err := redisscript.RunSlot(ctx, e.rdb, e.ks, slots.Name, "alice", "shop", redisscript.SlotTake, id); err != nil ||
			a.Code != redisscript.Allowed {
			t.Fatalf("take %s: %+v %v", id, a, err)
		}
	}
	if a, err := redisscript.AcquireKey(ctx, e.rdb, e.ks, q.Name, "alice", "shop", 7); err != nil || a.Code != redisscript.Allowed {
		t.Fatalf("acquire: %+v %v", a, err)
	}
	browser := startBrowser(t)
	olga := newTab(t, browser, e.srv.URL)
	olga.signIn("olga")
	lookUp := func(bucket, key string) {
		t.Helper()
		olga.open("/buckets/" + bucket)
		olga.fill("key-lookup", key)
		olga.submit("form[role=search][aria-labelledby=key-h] button[type=submit]")
	}
	for _, width := range []int64{1280, 400} {
		name := map[int64]string{1280: "wide", 400: "narrow"}[width]
		t.Run(name, func(t *testing.T) {
			olga.t = t
			olga.run("viewport", chromedp.EmulateViewport(width, 900))

			lookUp(slots.Name, "alice")
			olga.wantText("#default-limit", "Every caller key gets its own 20 slots, each held at most 30s unless renewed.")
			olga.wantText("#key-state", "Slots in use", "2 of 20", "First slot expires", "20 slots", "the bucket's default limit")
			if got := olga.text("#key-state"); strings.Contains(got, "Tokens") || strings.Contains(got, "tokens") {
				t.Fatalf("a concurrency limit's key speaks of tokens: %q", got)
			}
			if olga.count("#key-state [data-key-next-expiry] time") != 1 || olga.count(`#key-state svg.gauge[data-unit="slots"]`) != 1 {
				olga.shot(t, "failed")
				t.Fatal("want the first expiry as a time and a gauge of slots")
			}
			noSidewaysScroll(olga, width)
			olga.shot(t, "slots-key-"+name)

			lookUp(q.Name, "alice")
			olga.wantText("#default-limit", "Every caller key gets its own quota: 10,000 per month, resets on the 1st at 00:00 Europe/Berlin.")
			olga.wantText("#key-state", "Used this period", "7 of 10,000", "Resets", "10,000 per month")
			if got := olga.text("#key-state"); strings.Contains(got, "okens") || strings.Contains(got, "unknown") {
				t.Fatalf("a quota's key speaks of tokens or has no reset: %q", got)
			}
			if olga.count("#key-state [data-key-reset] time") != 1 {
				olga.shot(t, "failed")
				t.Fatal("want the reset as a time")
			}
			noSidewaysScroll(olga, width)
			olga.shot(t, "quota-key-"+name)
		})
	}
	olga.run("reset viewport", chromedp.ResetViewport())
}
