package console

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/redisscript"
)

// TestBrowserBucketList shows the bucket list with each bucket's state
// (rate, fill gauge, denied share, last-hour sparkline) at 1280 and 400 px
// wide, and the bucket page's tokens following Redis live.
func TestBrowserBucketList(t *testing.T) {
	e := newEnv(t)
	e.user("olga", false)
	e.app("shop", "olga")
	busy := e.bucket("shop-checkout", "shop")
	// A slow refill (10 an hour), so that what was taken stays taken.
	busy.Rate, _ = buckets.ParseRate("10/hour")
	if err := e.bkts.Update(context.Background(), e.system, busy); err != nil {
		t.Fatal(err)
	}
	e.applyBucket(busy)
	calm := e.bucket("shop-images", "shop")
	e.applyBucket(calm)
	now := time.Now()
	for m := 1; m <= 50; m++ {
		var d int64
		if m%5 == 0 {
			d = 7
		}
		e.record("shop", "shop-checkout", now.Add(-time.Duration(m)*time.Minute), int64(20+m%7), d)
		e.record("shop", "shop-images", now.Add(-time.Duration(m)*time.Minute), int64(3+m%3), 0)
	}
	e.rollUp()
	// Take 4 of the 10 tokens of the busy bucket.
	if _, err := redisscript.Acquire(context.Background(), e.rdb, e.ks, "shop-checkout", "shop", 4); err != nil {
		t.Fatal(err)
	}

	browser := startBrowser(t)
	olga := newTab(t, browser, e.srv.URL)
	olga.signIn("olga")

	visible := func(tb *tab, sel string) bool {
		tb.t.Helper()
		ok, err := chromedp.Run(tb.ctx, chromedp.Evaluate[bool](`(function(){var n=document.querySelectorAll(`+jsString(sel)+`);
			if(!n.length)return false;for(var i=0;i<n.length;i++){var r=n[i].getBoundingClientRect();
			if(r.width<1||r.height<1||r.right>document.documentElement.clientWidth+1)return false}return true})()`))
		if err != nil {
			tb.t.Fatalf("measure %s: %v", sel, err)
		}
		return ok
	}
	for _, width := range []int64{1280, 400} {
		t.Run(strings.TrimSpace(map[int64]string{1280: "wide", 400: "narrow"}[width]), func(t *testing.T) {
			olga.t = t
			olga.run("viewport", chromedp.EmulateViewport(width, 900))
			olga.open("/buckets")
			olga.wantText("tr[data-bucket='shop-checkout']", "shop-checkout", "per hour", "%")
			for _, sel := range []string{
				"tr[data-bucket='shop-checkout'] svg.gauge",
				"tr[data-bucket='shop-checkout'] svg.sparkline",
				"tr[data-bucket='shop-images'] svg.sparkline",
				"tr[data-bucket] td[data-label='Rate']",
				"tr[data-bucket] td[data-label='Denied (1 h)']",
			} {
				if !visible(olga, sel) {
					olga.shot(t, "failed")
					t.Fatalf("%s is not visible within the page at %d px", sel, width)
				}
			}
			sideways, err := chromedp.Run(olga.ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > document.documentElement.clientWidth`))
			if err != nil || sideways {
				olga.shot(t, "failed")
				t.Fatalf("the bucket list scrolls sideways at %d px", width)
			}
			olga.shot(t, "bucket-list")

			// Most denied first, then only buckets that denied something.
			olga.open("/buckets?sort=denied")
			olga.wantText("table.bucket-list tbody", "shop-checkout")
			if olga.count("tr[data-bucket='shop-images']") != 0 {
				t.Fatal("a bucket without denials is listed under \"most denied\"")
			}

			olga.open("/buckets/shop-checkout")
			before, err := strconv.Atoi(olga.text("[data-live-src] [data-live-tokens]"))
			if err != nil || before < 3 {
				t.Fatalf("the bucket page shows %d tokens (%v), want at least 3", before, err)
			}
			if !visible(olga, "[data-live-src] svg.gauge") {
				t.Fatalf("the gauge of the bucket page is not visible at %d px", width)
			}
			// Someone takes tokens: the page follows without a reload.
			if _, err := redisscript.Acquire(context.Background(), e.rdb, e.ks, "shop-checkout", "shop", 3); err != nil {
				t.Fatal(err)
			}
			pctx, cancel := context.WithTimeout(olga.ctx, 20*time.Second)
			now, err := chromedp.Run(pctx, chromedp.Poll[string](`(function(){var t=document.querySelector("[data-live-src] [data-live-tokens]").textContent;
				return t !== "`+strconv.Itoa(before)+`" && t !== "" ? t : null})()`, chromedp.WithPollingTimeout(15*time.Second)))
			cancel()
			if err != nil {
				olga.shot(t, "failed")
				t.Fatalf("the bucket page's tokens did not follow Redis: %v", err)
			}
			// At 10 an hour, at most one token can come back meanwhile.
			if n, _ := strconv.Atoi(now); n != before-3 && n != before-2 {
				t.Errorf("tokens after taking 3 of %d show %q", before, now)
			}
			olga.shot(t, "bucket-live")
		})
	}
	olga.run("reset viewport", chromedp.ResetViewport())
}

// visibleIn reports whether every element sel matches has a size and lies
// within the page's width (not cut off, not hidden).
func visibleIn(tb *tab, sel string) bool {
	tb.t.Helper()
	ok, err := chromedp.Run(tb.ctx, chromedp.Evaluate[bool](`(function(){var n=document.querySelectorAll(`+jsString(sel)+`);
		if(!n.length)return false;for(var i=0;i<n.length;i++){var r=n[i].getBoundingClientRect();
		if(r.width<1||r.height<1||r.right>document.documentElement.clientWidth+1)return false}return true})()`))
	if err != nil {
		tb.t.Fatalf("measure %s: %v", sel, err)
	}
	return ok
}

// TestBrowserNearLimitAndWouldDeny shows, at 1280 and 400 px wide, the
// bucket list's "near limit" badge and the filter on it (which submits by
// itself and keeps only those buckets), not on a bucket with light traffic
// (a few of its calls found it near its limit), and a shadow-mode bucket's
// chart with its would-deny bars and legend entry, and the calls a
// fail-closed client's policy refused during an outage, which shadow mode
// never would.
func TestBrowserNearLimitAndWouldDeny(t *testing.T) {
	e := newEnv(t)
	e.user("olga", false)
	e.app("shop", "olga")
	e.bucket("shop-checkout", "shop")
	e.bucket("shop-images", "shop")
	e.bucket("shop-light", "shop")
	trial := e.bucket("shop-trial", "shop")
	trial.Shadow = true
	if err := e.bkts.Update(context.Background(), e.system, trial); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for m := 1; m <= 30; m++ {
		at := now.Add(-time.Duration(m) * time.Minute)
		e.record("shop", "shop-checkout", at, 20, int64(m%3))
		e.recordMore("shop", "shop-checkout", at, int64(2+m%3), 0)
		e.record("shop", "shop-images", at, 4, 0)
		e.record("shop", "shop-trial", at, 12, 0)
		e.recordMore("shop", "shop-trial", at, int64(m%4), int64(m%4))
		e.record("shop", "shop-light", at, 40, 0)
	}
	// One burst in the hour took shop-light near its limit: 3 of 1,200.
	e.recordMore("shop", "shop-light", now.Add(-5*time.Minute), 3, 0)
	e.recordFallback("shop", "shop-trial", now.Add(-4*time.Minute), 0, 9)
	e.rollUp()

	browser := startBrowser(t)
	olga := newTab(t, browser, e.srv.URL)
	olga.signIn("olga")
	for _, width := range []int64{1280, 400} {
		t.Run(map[int64]string{1280: "wide", 400: "narrow"}[width], func(t *testing.T) {
			olga.t = t
			olga.run("viewport", chromedp.EmulateViewport(width, 900))
			olga.open("/buckets")
			for _, sel := range []string{
				"tr[data-bucket='shop-checkout'] .badge-near",
				"tr[data-bucket='shop-trial'] .badge-near",
				"input[name='near']",
				"label.check:has(input[name='near'])",
			} {
				if !visibleIn(olga, sel) {
					olga.shot(t, "failed")
					t.Fatalf("%s is not visible within the page at %d px", sel, width)
				}
			}
			if olga.count("tr[data-bucket='shop-images'] .badge-near") != 0 {
				t.Fatal("a calm bucket has the near-limit badge")
			}
			if !visibleIn(olga, "tr[data-bucket='shop-light']") || olga.count("tr[data-bucket='shop-light'] .badge-near") != 0 {
				olga.shot(t, "failed")
				t.Fatal("a bucket with light traffic (3 of 1,200 calls near its limit) has the near-limit badge")
			}
			olga.wantText("tr[data-bucket='shop-checkout'] .badge-near", "Near limit")
			olga.shot(t, "list-near-badge")

			// The filter submits itself on a click: only near buckets stay.
			olga.run("filter near limit", chromedp.Click("input[name='near']"), chromedp.WaitVisible("#list-order"))
			olga.wantText("#list-order", "near the limit")
			if olga.count("tr[data-bucket]") != 2 || olga.count("tr[data-bucket='shop-images']") != 0 {
				olga.shot(t, "failed")
				t.Fatalf("the near-limit filter shows %d buckets, want shop-checkout and shop-trial", olga.count("tr[data-bucket]"))
			}
			olga.shot(t, "list-near-filter")

			// The shadow bucket's chart: the drawing shown at this width
			// has would-deny bars and names them in its legend.
			olga.open("/buckets/shop-trial")
			shown := map[int64]string{1280: ".chart-wide", 400: ".chart-narrow"}[width]
			for _, sel := range []string{shown + " rect.chart-would", shown + " .chart-legend text"} {
				if !visibleIn(olga, sel) {
					olga.shot(t, "failed")
					t.Fatalf("%s is not visible within the page at %d px", sel, width)
				}
			}
			// SVG text has no innerText: read its textContent.
			legend, err := chromedp.Run(olga.ctx, chromedp.Evaluate[string](
				`document.querySelector(`+jsString(shown+" .chart-legend")+`).textContent`))
			if err != nil || !strings.Contains(legend, "would deny (shadow mode): ") {
				olga.shot(t, "failed")
				t.Fatalf("the legend reads %q (%v), want a would-deny entry", legend, err)
			}
			if !visibleIn(olga, "table.usage-apps tbody tr > :last-child") {
				olga.shot(t, "failed")
				t.Fatalf("the per-app table's last column is cut off at %d px", width)
			}
			if !visibleIn(olga, "[data-would-deny]") {
				t.Fatalf("the would-deny total is not visible at %d px", width)
			}
			// The failure policy's refusals: bars, legend entry and total.
			if !visibleIn(olga, shown+" rect.chart-fallback-refused") || !visibleIn(olga, "[data-fallback-refused]") {
				olga.shot(t, "failed")
				t.Fatalf("the failure policy's refusals are not visible at %d px", width)
			}
			if !strings.Contains(legend, "refused by the failure policy: 9") {
				olga.shot(t, "failed")
				t.Fatalf("the legend reads %q, want the failure policy's 9 refusals", legend)
			}
			olga.wantText("[data-fallback-refused]", "9")
			olga.shot(t, "chart-would-deny")
		})
	}
	olga.run("reset viewport", chromedp.ResetViewport())
}
