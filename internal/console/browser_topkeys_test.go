package console

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/client/usage"
	"github.com/sluicehq/sluice/internal/redisscript"
)

// TestBrowserTopKeys shows a keyed bucket's top keys at 1280 and 400 px:
// the keys denied most and taking most with their counts, a key's live
// state from the list or the lookup box, and "add an override" filled in
// with the key and its current limit.
func TestBrowserTopKeys(t *testing.T) {
	e := newEnv(t)
	e.user("olga", false)
	e.app("shop", "olga")
	b := e.keyedBucket("shop-login", "shop")
	cfg := redisscript.Config{Name: b.Name, ID: b.ID, Version: b.Version, Capacity: b.MaxPermits,
		PermitsMicro: b.Rate.PermitsMicro, PeriodSeconds: b.Rate.PeriodSeconds(), Apps: []string{"shop"}}
	ctx := context.Background()
	if _, err := redisscript.ApplyKeyed(ctx, e.rdb, e.ks, cfg, false); err != nil {
		t.Fatal(err)
	}
	rec, err := usage.NewRecorder(e.rdb, "shop", usage.WithKeyPrefix(e.ks.Prefix), usage.WithFlushInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for i := range 30 {
		key := fmt.Sprintf("customer:%d", 1000+i)
		rec.AddKey("shop-login", key, now, false, int64(500-i*10))
		rec.AddKey("shop-login", key, now, true, int64(40+i))
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	// The top denied key holds no tokens now.
	k := e.ks.Keyed("shop-login", "customer:1000")
	if err := e.rdb.Set(ctx, k.State, fmt.Sprintf("%d %d", b.ID, now.Add(time.Minute).UnixMicro()), time.Hour).Err(); err != nil {
		t.Fatal(err)
	}

	browser := startBrowser(t)
	olga := newTab(t, browser, e.srv.URL)
	olga.signIn("olga")
	for _, width := range []int64{1280, 400} {
		name := map[int64]string{1280: "wide", 400: "narrow"}[width]
		t.Run(name, func(t *testing.T) {
			olga.t = t
			olga.run("viewport", chromedp.EmulateViewport(width, 900))
			olga.open("/buckets/shop-login")
			olga.wantText("#top-denied tbody tr:first-child", "customer:1000", "500")
			olga.wantText("#top-taken tbody tr:first-child", "customer:1029", "69")
			if n := olga.count("#top-denied tbody tr"); n != 10 {
				t.Fatalf("the denied list shows %d keys, want 10", n)
			}
			if !visibleIn(olga, "#top-denied tbody tr:first-child a") {
				olga.shot(t, "failed")
				t.Fatalf("the top key's links are hidden at %d px", width)
			}
			noSidewaysScroll(olga, width)
			olga.shot(t, "topkeys-"+name)

			// A key's state, from the list.
			olga.submit("#top-denied tbody tr:first-child a[href*='#key-h']")
			olga.wantText("#key-state", "customer:1000", "of 10", "the bucket's default limit")
			olga.wantText("[data-key-tokens]", "0")
			if olga.count("#key-state [data-add-override]") != 1 {
				olga.shot(t, "failed")
				t.Fatal("no \"add an override for this key\"")
			}
			vals, err := chromedp.Run(olga.ctx, chromedp.Evaluate[[]string](`[document.querySelector("#overrides form[method=post] [name=key]").value,
				document.querySelector("#overrides form[method=post] [name=max_permits]").value,
				document.querySelector("#overrides form[method=post] [name=rate]").value]`))
			if err != nil || fmt.Sprint(vals) != "[customer:1000 10 100/min]" {
				t.Fatalf("the override form holds %v (%v), want the key and its limit", vals, err)
			}
			noSidewaysScroll(olga, width)
			olga.shot(t, "keystate-"+name)

			// The lookup box, for a key in no list.
			olga.fill("key-lookup", "someone-else")
			olga.submit("form[aria-labelledby=key-h] button[type=submit]")
			olga.wantText("#key-state", "someone-else", "10 of 10", "full")
		})
	}
	olga.run("reset viewport", chromedp.ResetViewport())
}

// noSidewaysScroll fails the test when the page in tb is wider than the
// window at width px.
func noSidewaysScroll(tb *tab, width int64) {
	tb.t.Helper()
	wide, err := chromedp.Run(tb.ctx, chromedp.Evaluate[bool](`document.scrollingElement.scrollWidth > window.innerWidth`))
	if err != nil {
		tb.t.Fatal(err)
	}
	if wide {
		tb.shot(tb.t, "failed")
		tb.t.Fatalf("the page scrolls sideways at %d px", width)
	}
}
