package console

import (
	"context"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/redisscript/quota"
)

// TestBrowserLiveQuota: a quota's page follows what it used this period
// without a reload, with the reset and the time of the read.
func TestBrowserLiveQuota(t *testing.T) {
	e := newEnv(t)
	e.user("olga", false)
	e.app("shop", "olga")
	b := &buckets.Bucket{Name: "shop-daily", OwnerApp: "shop", Kind: buckets.KindQuota, MaxPermits: 1000,
		QuotaPeriod: quota.Day, TimeZone: "UTC"}
	if err := e.bkts.Create(context.Background(), e.system, b); err != nil {
		t.Fatal(err)
	}
	e.applyBucket(b)
	browser := startBrowser(t)
	olga := newTab(t, browser, e.srv.URL)
	olga.signIn("olga")
	olga.run("viewport", chromedp.EmulateViewport(1280, 900))
	olga.open("/buckets/shop-daily")
	if got := olga.text("#quota-used"); got != "0" {
		t.Fatalf("used at first: %q", got)
	}
	asOf, err := chromedp.Run(olga.ctx, chromedp.Evaluate[string](
		`document.querySelector("#quota-reset").closest("dl").querySelector("[data-live-now] time").getAttribute("datetime")`))
	if err != nil {
		t.Fatal(err)
	}
	if a, err := redisscript.Acquire(context.Background(), e.rdb, e.ks, b.Name, "shop", 234); err != nil ||
		a.Code != redisscript.Allowed {
		t.Fatalf("acquire: %+v %v", a, err)
	}
	pollJS(olga, "the page follows the quota used", `(function(){
		var now = document.querySelector("#quota-reset").closest("dl").querySelector("[data-live-now] time");
		return document.querySelector("#quota-used").textContent.trim() === "234" &&
			document.querySelector("#quota-reset time") !== null &&
			now.getAttribute("datetime") !== `+jsString(asOf)+`;
	})()`)
}
