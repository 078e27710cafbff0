package console

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/internal/redisscript"
)

// TestBrowserChartsReadable: usage charts with units on the axis and in
// the legend (per minute, not per second), a keyed bucket's limit named
// per key, a week whose limit is far above the traffic scaled to the
// traffic, and the time axis in the viewer's zone with UTC on hover; at
// 1280 and 400 px.
func TestBrowserChartsReadable(t *testing.T) {
	e := newEnv(t)
	e.user("olga", false)
	e.app("shop", "olga")
	plain := e.bucket("shop-checkout", "shop")
	e.applyBucket(plain)
	keyed := e.keyedBucket("shop-login", "shop")
	cfg := redisscript.Config{Name: keyed.Name, ID: keyed.ID, Version: keyed.Version, Capacity: keyed.MaxPermits,
		PermitsMicro: keyed.Rate.PermitsMicro, PeriodSeconds: keyed.Rate.PeriodSeconds(), Apps: []string{"shop"}}
	if _, err := redisscript.ApplyKeyed(context.Background(), e.rdb, e.ks, cfg, false); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for m := 1; m <= 30; m++ {
		// Many keys at 100 per minute each: 400 a minute in all.
		e.record("shop", "shop-login", now.Add(-time.Duration(m)*time.Minute), 400, 0)
		e.record("shop", "shop-checkout", now.Add(-time.Duration(m)*time.Minute), 2, 0)
	}
	e.rollUp()

	browser := startBrowser(t)
	olga := newTab(t, browser, e.srv.URL)
	olga.run("time zone", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Asia/Kolkata"})
		return err
	}))
	olga.signIn("olga")
	visibleChart := `Array.from(document.querySelectorAll("#usage svg.usage-chart")).filter(function(c){return c.getBoundingClientRect().width>0})[0]`
	for _, width := range []int64{1280, 400} {
		name := map[int64]string{1280: "wide", 400: "narrow"}[width]
		t.Run(name, func(t *testing.T) {
			olga.t = t
			olga.run("viewport", chromedp.EmulateViewport(width, 900))

			olga.open("/buckets/shop-login")
			texts, err := chromedp.Run(olga.ctx, chromedp.Evaluate[string](visibleChart+`.textContent`))
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"Acquires per minute, last hour", "allowed per minute ↑", "limit per key: 100 per minute"} {
				if !strings.Contains(texts, want) {
					olga.shot(t, "failed")
					t.Fatalf("the keyed bucket's chart lacks %q: %q", want, texts)
				}
			}
			if strings.Contains(texts, "per second") {
				t.Fatalf("the chart speaks of seconds: %q", texts)
			}
			// Time labels in the viewer's zone (UTC+5:30), UTC on hover.
			label, err := chromedp.Run(olga.ctx, chromedp.Evaluate[[]string](`(function(){var el=`+visibleChart+`.querySelector("text[data-t][data-localized]");
				return el ? [el.firstChild.nodeValue, el.querySelector("title").textContent] : []})()`))
			if err != nil || len(label) != 2 || !strings.HasSuffix(label[1], " UTC") || strings.Contains(label[1], " "+label[0]+" ") {
				olga.shot(t, "failed")
				t.Fatalf("a time label reads %v (%v): want the local time, UTC on hover", label, err)
			}
			noSidewaysScroll(olga, width)
			olga.shot(t, "keyed-chart-"+name)

			// The week: 120 an hour against a limit of 6,000 an hour.
			olga.open("/buckets/shop-checkout?window=week")
			texts, err = chromedp.Run(olga.ctx, chromedp.Evaluate[string](visibleChart+`.textContent`))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(texts, "limit: 6,000 per hour (above the scale)") || strings.Contains(texts, "6k") {
				olga.shot(t, "failed")
				t.Fatalf("the week chart is not fitted to its traffic: %q", texts)
			}
			if olga.count("#usage svg.usage-chart .chart-limit line") != 0 {
				t.Fatal("the week chart draws a limit line far above its bars")
			}
			noSidewaysScroll(olga, width)
			olga.shot(t, "week-chart-"+name)
		})
	}
	olga.run("reset viewport", chromedp.ResetViewport())
}
