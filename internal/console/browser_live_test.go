package console

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/redisscript"
)

// pollJS waits until expr (a JavaScript expression) is true in tb's page.
func pollJS(tb *tab, what, expr string) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 20*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`(function(){return (`+expr+`) ? true : null})()`,
		chromedp.WithPollingTimeout(18*time.Second))); err != nil {
		tb.shot(tb.t, "failed")
		tb.t.Fatalf("%s: %v", what, err)
	}
}

// TestBrowserLiveFiguresTogether: every live figure of a bucket's page
// follows Redis (the tokens in the live card and in the usage card, the
// last refill, "as of"), the usage chart is drawn again while the page
// is open, and a keyed bucket is "per key" in the list, not "not in Redis".
func TestBrowserLiveFiguresTogether(t *testing.T) {
	e := newEnv(t)
	e.user("olga", false)
	e.app("shop", "olga")
	// Slow to refill, so the tokens taken stay taken while the page polls.
	rate, _ := buckets.ParseRate("1/hour")
	b := &buckets.Bucket{Name: "shop-checkout", OwnerApp: "shop", MaxPermits: 10, Rate: rate}
	if err := e.bkts.Create(context.Background(), e.system, b); err != nil {
		t.Fatal(err)
	}
	e.applyBucket(b)
	e.record("shop", "shop-checkout", time.Now().Add(-2*time.Minute), 3, 0)
	e.rollUp()
	k := e.keyedBucket("shop-login", "shop")
	cfg := redisscript.Config{Name: k.Name, ID: k.ID, Version: k.Version, Capacity: k.MaxPermits,
		PermitsMicro: k.Rate.PermitsMicro, PeriodSeconds: k.Rate.PeriodSeconds(), Apps: []string{"shop"}}
	if _, err := redisscript.ApplyKeyed(context.Background(), e.rdb, e.ks, cfg, false); err != nil {
		t.Fatal(err)
	}

	browser := startBrowser(t)
	olga := newTab(t, browser, e.srv.URL)
	olga.signIn("olga")
	olga.run("viewport", chromedp.EmulateViewport(1280, 900))
	olga.open("/buckets/shop-checkout")
	asOf := olga.text("[data-live-now]")
	refilled, err := chromedp.Run(olga.ctx, chromedp.Evaluate[string](`document.querySelector("[data-live-refilled] time").getAttribute("datetime")`))
	if err != nil {
		t.Fatal(err)
	}

	// Take 4 of the 10 tokens: both token counts, the last refill and
	// "as of" change without a reload.
	if _, err := redisscript.Acquire(context.Background(), e.rdb, e.ks, "shop-checkout", "shop", 4); err != nil {
		t.Fatal(err)
	}
	pollJS(olga, "the live figures follow Redis", `(function(){
		var t = Array.from(document.querySelectorAll("[data-live-tokens]")).map(function(e){return e.textContent.trim()});
		var r = document.querySelector("[data-live-refilled] time");
		return t.length === 2 && t[0] === t[1] && parseInt(t[0], 10) <= 6 && r.getAttribute("datetime") !== `+jsString(refilled)+` &&
			document.querySelector("[data-live-now]").textContent !== `+jsString(asOf)+`;
	})()`)

	// The usage chart is drawn again while the page is open (the test
	// shortens the interval; the page asks for 60 s).
	if got := olga.text("#usage dl.stats dd"); got != "3" {
		t.Fatalf("usage stats before: %q", got)
	}
	e.record("shop", "shop-checkout", time.Now().Add(-time.Minute), 40, 0)
	e.rollUp()
	if _, err := chromedp.Run(olga.ctx, chromedp.Evaluate[bool](`document.getElementById("usage").setAttribute("data-refresh", "1");
		document.dispatchEvent(new Event("visibilitychange")); true`)); err != nil {
		t.Fatal(err)
	}
	pollJS(olga, "the chart refreshes", `document.querySelector("#usage").hasAttribute("data-refreshed") &&
		document.querySelector("#usage dl.stats dd").textContent.trim() === "43"`)

	// On a phone the live state comes first, within the first screen.
	olga.run("viewport", chromedp.EmulateViewport(400, 800))
	olga.open("/buckets/shop-checkout")
	top, err := chromedp.Run(olga.ctx, chromedp.Evaluate[[]float64](`[document.querySelector("[data-live-tokens]").getBoundingClientRect().top,
		document.getElementById("def-h").getBoundingClientRect().top]`))
	if err != nil || len(top) != 2 || top[0] > 600 || top[0] > top[1] {
		olga.shot(t, "failed")
		t.Fatalf("on a phone the live tokens are at y=%v (definition at %v, %v): want first, on the first screen", top[0], top[1], err)
	}
	olga.shot(t, "live-first-narrow")

	for _, width := range []int64{1280, 400} {
		olga.run("viewport", chromedp.EmulateViewport(width, 900))
		olga.open("/buckets")
		olga.wantText("tr[data-bucket='shop-login'] td[data-label='Tokens now']", "per key")
		// After a poll of the live state too.
		pollJS(olga, "the list's live state is read", `document.querySelector("table[data-live-src]").hasAttribute("data-live-updated")`)
		if got := olga.text("tr[data-bucket='shop-login'] td[data-label='Tokens now']"); strings.Contains(got, "not in Redis") {
			t.Fatalf("the keyed bucket is %q in the list", got)
		}
		noSidewaysScroll(olga, width)
	}
	olga.run("reset viewport", chromedp.ResetViewport())
}
