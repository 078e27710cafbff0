package console

import (
	"context"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/redisscript"
)

// TestBrowserLiveSlots: a concurrency limit's page follows its slots in
// use without a reload: a slot taken in Redis shows in the count, the
// free slots and the gauge, and its release takes it away again.
func TestBrowserLiveSlots(t *testing.T) {
	e := newEnv(t)
	e.user("olga", false)
	e.app("shop", "olga")
	b := &buckets.Bucket{Name: "shop-exports", OwnerApp: "shop", Kind: buckets.KindConcurrency, MaxPermits: 4,
		SlotMillis: 600_000}
	if err := e.bkts.Create(context.Background(), e.system, b); err != nil {
		t.Fatal(err)
	}
	e.applyBucket(b)
	browser := startBrowser(t)
	olga := newTab(t, browser, e.srv.URL)
	olga.signIn("olga")
	olga.run("viewport", chromedp.EmulateViewport(1280, 900))
	olga.open("/buckets/shop-exports")
	if got := olga.text("#slots-in-use"); got != "0" {
		t.Fatalf("slots in use at first: %q", got)
	}
	slot := func(op redisscript.SlotOp, id string) {
		if a, err := redisscript.RunSlot(context.Background(), e.rdb, e.ks, b.Name, "", "shop", op, id); err != nil ||
			a.Code != redisscript.Allowed {
			t.Fatalf("%s %s: %+v %v", op, id, a, err)
		}
	}
	slot(redisscript.SlotTake, "a")
	slot(redisscript.SlotTake, "b")
	pollJS(olga, "the page follows the slots taken", `(function(){
		var g = document.querySelector("svg.gauge");
		return document.querySelector("#slots-in-use").textContent.trim() === "2" &&
			document.querySelector("[data-live-tokens]").textContent.trim() === "2" &&
			g.getAttribute("aria-valuenow") === "2" && g.getAttribute("aria-label").indexOf("slots available") > 0 &&
			document.querySelector("[data-live-next-expiry] time") !== null;
	})()`)
	slot(redisscript.SlotRelease, "a")
	slot(redisscript.SlotRelease, "b")
	pollJS(olga, "the page follows the slots released", `(function(){
		return document.querySelector("#slots-in-use").textContent.trim() === "0" &&
			document.querySelector("[data-live-next-expiry]").textContent.trim() === "no slot held";
	})()`)
}
