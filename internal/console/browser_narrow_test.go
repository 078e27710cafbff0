package console

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/redisscript"
)

// TestBrowserNoPageScrollsSideways opens every page of the console on a
// 400 px phone, with content in each (long names, a keyed bucket with
// overrides and top keys, usage, audit entries, tokens), and checks that
// none is wider than the window.
func TestBrowserNoPageScrollsSideways(t *testing.T) {
	e := newEnv(t)
	e.user("ada", true)
	e.app("shop-with-a-rather-long-name", "ada")
	plain := e.bucket("shop-with-a-rather-long-name.checkout-api", "shop-with-a-rather-long-name")
	e.applyBucket(plain)
	keyed := e.keyedBucket("shop-with-a-rather-long-name.login", "shop-with-a-rather-long-name")
	cfg := redisscript.Config{Name: keyed.Name, ID: keyed.ID, Version: keyed.Version, Capacity: keyed.MaxPermits,
		PermitsMicro: keyed.Rate.PermitsMicro, PeriodSeconds: keyed.Rate.PeriodSeconds(), Apps: []string{keyed.OwnerApp}}
	ctx := context.Background()
	if _, err := redisscript.ApplyKeyed(ctx, e.rdb, e.ks, cfg, false); err != nil {
		t.Fatal(err)
	}
	rate, _ := buckets.ParseRate("5/s")
	o := &buckets.Override{Bucket: keyed.Name, Match: buckets.MatchPrefix, Key: "customer-with-a-long-prefix:", MaxPermits: 50, Rate: rate}
	if err := e.bkts.CreateOverride(ctx, e.system, o); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for m := 1; m <= 20; m++ {
		e.record("shop-with-a-rather-long-name", plain.Name, now.Add(-time.Duration(m)*time.Minute), int64(10+m), int64(m%3))
	}
	e.rollUp()
	hour := now.Unix() / 3600
	longKey := "customer-with-a-long-prefix:0123456789abcdef0123456789abcdef0123456789abcdef"
	if err := e.rdb.ZIncrBy(ctx, e.ks.DeniedKeys(keyed.Name, hour), 99, longKey).Err(); err != nil {
		t.Fatal(err)
	}

	browser := startBrowser(t)
	ada := newTab(t, browser, e.srv.URL)
	ada.signIn("ada")
	ada.run("viewport", chromedp.EmulateViewport(400, 900))
	// An edit, for the audit log's diffs.
	ada.open("/buckets/" + plain.Name + "/edit")
	ada.fill("max_permits", "25")
	ada.submit("main form button.btn-primary")

	pages := []string{
		"/buckets", "/buckets/new", "/buckets/" + plain.Name, "/buckets/" + plain.Name + "?window=week",
		"/buckets/" + plain.Name + "/edit", "/buckets/" + plain.Name + "/delete",
		"/buckets/" + keyed.Name, "/buckets/" + keyed.Name + "?key=" + url.QueryEscape(longKey),
		fmt.Sprintf("/buckets/%s/overrides/%d/edit", keyed.Name, o.ID), fmt.Sprintf("/buckets/%s/overrides/%d/delete", keyed.Name, o.ID),
		"/apps", "/apps/new", "/apps/shop-with-a-rather-long-name", "/usage", "/audit", "/tokens", "/account", "/users",
		"/buckets/no-such-bucket",
	}
	for _, p := range pages {
		t.Run(p, func(t *testing.T) {
			ada.t = t
			ada.open(p)
			noSidewaysScroll(ada, 400)
		})
	}
	ada.run("reset viewport", chromedp.ResetViewport())
}
