package console

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserAtAGlance walks the points of the console's state at a glance
// that other browser tests do not, at 1280 and 400 px wide, with
// screenshots: the usage chart (denied in its own colour, the limit line,
// a short empty chart, no sideways scroll), what a phone must still show
// (the bucket's rate, the audit log's object and change, "API tokens" in
// the top bar), the bucket form's summary as you type and its preview,
// local times with UTC on hover in plain words, and a signed-in 404.
func TestBrowserAtAGlance(t *testing.T) {
	e := newEnv(t)
	e.user("olga", false)
	e.app("shop", "olga")
	busy := e.bucket("shop-checkout", "shop")
	e.applyBucket(busy)
	quiet := e.bucket("shop-images", "shop")
	e.applyBucket(quiet)
	now := time.Now()
	for m := 1; m <= 50; m++ {
		var d int64
		if m%5 == 0 {
			d = 9
		}
		e.record("shop", "shop-checkout", now.Add(-time.Duration(m)*time.Minute), int64(20+m%7), d)
	}
	e.rollUp()

	browser := startBrowser(t)
	olga := newTab(t, browser, e.srv.URL)
	olga.signIn("olga")
	// An edit, for the audit log's change column.
	olga.open("/buckets/shop-checkout/edit")
	olga.fill("max_permits", "25")
	olga.submit("main form button.btn-primary")

	noSideways := func(tb *tab, width int64) {
		tb.t.Helper()
		wide, err := chromedp.Run(tb.ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > document.documentElement.clientWidth + 1`))
		if err != nil {
			tb.t.Fatal(err)
		}
		if wide {
			tb.shot(tb.t, "failed")
			tb.t.Fatalf("the page scrolls sideways at %d px", width)
		}
	}
	for _, width := range []int64{1280, 400} {
		name := map[int64]string{1280: "wide", 400: "narrow"}[width]
		t.Run(name, func(t *testing.T) {
			olga.t = t
			olga.run("viewport", chromedp.EmulateViewport(width, 900))

			// The usage chart: denials drawn apart from allowed calls, in
			// their own colour, the sustained rate as a line.
			olga.open("/buckets/shop-checkout")
			if olga.count("#usage svg.usage-chart rect.chart-denied") == 0 || olga.count("#usage svg.usage-chart .chart-limit line") == 0 {
				olga.shot(t, "failed")
				t.Fatalf("the chart lacks its denied bars (%d) or its limit line (%d): %s", olga.count("#usage svg.usage-chart rect.chart-denied"),
					olga.count("#usage svg.usage-chart .chart-limit line"), olga.text("h1"))
			}
			colours, err := chromedp.Run(olga.ctx, chromedp.Evaluate[[]string](`[getComputedStyle(document.querySelector("#usage rect.chart-allowed")).fill,
				getComputedStyle(document.querySelector("#usage rect.chart-denied")).fill]`))
			if err != nil || len(colours) != 2 || colours[0] == colours[1] || colours[1] == "" {
				t.Fatalf("allowed and denied colours %v (%v): want two different ones", colours, err)
			}
			// The wide and the narrow drawing are both in the page; the one
			// shown fits its width.
			fits, err := chromedp.Run(olga.ctx, chromedp.Evaluate[int](`Array.from(document.querySelectorAll("#usage svg.usage-chart")).filter(function(c){
				var r=c.getBoundingClientRect();return r.width>0&&r.height>0&&r.right<=document.documentElement.clientWidth+1}).length`))
			if err != nil || fits != 1 {
				olga.shot(t, "failed")
				t.Fatalf("%d usage charts shown within the page at %d px (%v), want 1", fits, width, err)
			}
			noSideways(olga, width)
			// Plain words, and times in the viewer's zone with UTC on hover.
			olga.wantText("main", "Definition in use", "As of")
			pctx, cancel := context.WithTimeout(olga.ctx, 10*time.Second)
			title, err := chromedp.Run(pctx, chromedp.Poll[string](`(function(){var t=document.querySelector("time[data-localized]");
				return t ? t.title : null})()`, chromedp.WithPollingTimeout(8*time.Second)))
			cancel()
			if err != nil || !strings.HasSuffix(title, " UTC") {
				t.Fatalf("a time's hover text is %q (%v), want the UTC time", title, err)
			}
			olga.shot(t, "chart-"+name)

			// A bucket without usage draws a short empty chart.
			olga.open("/buckets/shop-images")
			olga.wantText("#usage", "No acquires counted in this window")
			h, err := chromedp.Run(olga.ctx, chromedp.Evaluate[float64](`Math.max.apply(null, Array.from(document.querySelectorAll("#usage svg.chart-is-empty")).map(function(c){
				return c.getBoundingClientRect().height}))`))
			if err != nil || h <= 0 || h > 120 {
				t.Fatalf("the empty chart is %v px high (%v), want a short box", h, err)
			}

			// What a phone still shows: the rate of each bucket, the audit
			// log's object and change, and API tokens in the top bar.
			olga.open("/buckets")
			olga.wantText("tr[data-bucket='shop-checkout'] td[data-label='Rate']", "burst")
			if !visibleIn(olga, "tr[data-bucket='shop-checkout'] td[data-label='Rate']") {
				t.Fatalf("the bucket list hides the rate at %d px", width)
			}
			if !visibleIn(olga, "nav.nav a[href='/tokens']") {
				t.Fatalf("the top bar hides API tokens at %d px", width)
			}
			olga.open("/audit")
			olga.wantText("tbody td[data-label='Object']", "shop-checkout")
			olga.wantText("tbody td[data-label='Change']", "max_permits")
			if !visibleIn(olga, "tbody tr:first-child td[data-label='Object']") || !visibleIn(olga, "tbody tr:first-child td[data-label='Change']") {
				t.Fatalf("the audit log hides the object or the change at %d px", width)
			}
			noSideways(olga, width)
			olga.shot(t, "audit-"+name)

			// The form's summary follows what is typed; the owner app
			// starts empty; the preview draws the pattern server-side.
			olga.open("/buckets/new")
			owner, err := chromedp.Run(olga.ctx, chromedp.Evaluate[string](`document.getElementById("owner_app").value`))
			if err != nil || owner != "" {
				t.Fatalf("the owner app starts as %q (%v), want empty", owner, err)
			}
			olga.fill("max_permits", "10")
			olga.run("type a rate", chromedp.SendKeys(chromedp.ID("rate"), "5/s"))
			pctx, cancel = context.WithTimeout(olga.ctx, 10*time.Second)
			summary, err := chromedp.Run(pctx, chromedp.Poll[string](`(function(){var s=document.getElementById("limit-summary").textContent;
				return s.indexOf("300") >= 0 ? s : null})()`, chromedp.WithPollingTimeout(8*time.Second)))
			cancel()
			if err != nil || !strings.Contains(summary, "10") {
				olga.shot(t, "failed")
				t.Fatalf("the summary says %q (%v), want bursts of 10 and 300 a minute", summary, err)
			}
			olga.fill("steady", "8", "duration", "20")
			olga.submit("#preview button[name=preview]")
			if olga.count("figure.preview-chart svg rect.chart-denied") == 0 {
				olga.shot(t, "failed")
				t.Fatal("a preview of 8/s against 5/s draws no denials")
			}
			noSideways(olga, width)
			olga.shot(t, "preview-"+name)

			// A 404 while signed in keeps the navigation, offers no sign-in.
			olga.open("/buckets/no-such-bucket")
			olga.wantText("main", "not")
			if olga.count("nav.nav a[href='/buckets']") != 1 || olga.count("a[href='/login']") != 0 {
				olga.shot(t, "failed")
				t.Fatal("the signed-in 404 lost the navigation or offers to sign in")
			}
			olga.shot(t, "404-"+name)
		})
	}
	olga.run("reset viewport", chromedp.ResetViewport())
}
