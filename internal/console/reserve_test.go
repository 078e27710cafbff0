package console

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/redisscript"
)

// TestBucketReserveOnTheForm: the reserve field with its help, inline
// errors for a reserve that is not a number or not below the capacity,
// the preview saying what the reserve does, and the detail page with the
// definition and the reserve left in Redis.
func TestBucketReserveOnTheForm(t *testing.T) {
	e, ob, _ := bucketFixture(t)
	r := ob.get("/buckets/new")
	wantBody(t, "new bucket form", r, "Reserve for critical requests (tokens, 0 = none)", `name="reserve"`,
		"mark critical: any other request is refused when taking its tokens would leave fewer than this")

	form := url.Values{"name": {"kept"}, "owner_app": {"alpha"}, "max_permits": {"10"}, "rate": {"1/h"}, "reserve": {"many"}}
	r = ob.post("/buckets", form)
	wantStatus(t, "reserve not a number", r, http.StatusUnprocessableEntity)
	wantBody(t, "reserve not a number", r, `id="reserve-error"`, `aria-describedby="reserve-hint reserve-error"`, `value="many"`)
	form.Set("reserve", "10")
	r = ob.post("/buckets", form)
	wantStatus(t, "reserve of the whole capacity", r, http.StatusUnprocessableEntity)
	wantBody(t, "reserve of the whole capacity", r, `id="reserve-error"`, "must be less than max_permits (10)")

	// The preview's requests leave the reserve, and it says so.
	form.Set("reserve", "4")
	preview := url.Values{"preview": {"1"}, "steady": {""}, "burst": {"10"}, "every": {"60"}, "duration": {"10"}}
	for k, v := range form {
		preview[k] = v
	}
	r = ob.post("/buckets", preview)
	wantStatus(t, "preview", r, http.StatusOK)
	wantBody(t, "preview", r, "6 allowed, 4 denied", "they leave the reserve of 4 tokens, which only critical requests may take",
		`id="reserve-summary">The bucket keeps 4 of its 10 tokens for critical requests: the others get at most 6 at once`)

	r = ob.post("/buckets", form)
	wantStatus(t, "valid", r, http.StatusSeeOther)
	b, err := e.bkts.Get(context.Background(), "kept")
	if err != nil || b.Reserve != 4 {
		t.Fatalf("saved %+v %v", b, err)
	}
	e.applyBucket(b)
	// A critical request takes 8: 2 are left, both of the reserve.
	if a, err := redisscript.AcquireCritical(context.Background(), e.rdb, e.ks, "kept", "alpha", 8, true); err != nil ||
		a.Code != redisscript.Allowed {
		t.Fatalf("critical acquire: %+v %v", a, err)
	}
	r = ob.get("/buckets/kept")
	wantBody(t, "detail", r, `id="reserve">4 tokens kept for critical requests: others get at most 6 at once`,
		`<dt>Reserve left</dt><dd id="reserve-left"><span data-live-reserve-left>2</span> of 4 tokens kept for critical requests`)
	r = ob.get("/buckets/kept/state.json")
	var st struct {
		Reserve int64   `json:"reserve"`
		Tokens  float64 `json:"tokens"`
	}
	if err := json.Unmarshal([]byte(r.body), &st); err != nil || st.Reserve != 4 || st.Tokens < 2 || st.Tokens > 3 {
		t.Fatalf("state.json %s: %+v %v", r.body, st, err)
	}

	// The edit form shows it; clearing it removes the reserve.
	r = ob.get("/buckets/kept/edit")
	wantBody(t, "edit form", r, `name="reserve" value="4"`)
	r = ob.post("/buckets/kept", url.Values{"max_permits": {"10"}, "rate": {"1/h"}, "allowed_apps": {"alpha"},
		"reserve": {""}, "version": {"1"}})
	wantStatus(t, "edit", r, http.StatusSeeOther)
	if b, err := e.bkts.Get(context.Background(), "kept"); err != nil || b.Reserve != 0 || b.Version != 2 {
		t.Fatalf("after edit %+v %v", b, err)
	}
	wantBody(t, "detail without reserve", ob.get("/buckets/kept"), `id="reserve">none: every request may take every token`)
}

// TestBrowserReserveLeft: the reserve left on a bucket's page follows
// Redis without a reload, as the tokens do.
func TestBrowserReserveLeft(t *testing.T) {
	e := newEnv(t)
	e.user("olga", false)
	e.app("shop", "olga")
	rate, _ := buckets.ParseRate("1/hour")
	b := &buckets.Bucket{Name: "shop-pay", OwnerApp: "shop", MaxPermits: 10, Rate: rate, Reserve: 4}
	if err := e.bkts.Create(context.Background(), e.system, b); err != nil {
		t.Fatal(err)
	}
	e.applyBucket(b)

	browser := startBrowser(t)
	olga := newTab(t, browser, e.srv.URL)
	olga.signIn("olga")
	olga.run("viewport", chromedp.EmulateViewport(1280, 900))
	olga.open("/buckets/shop-pay")
	if got := olga.text("[data-live-reserve-left]"); got != "4" {
		t.Fatalf("reserve left of a full bucket: %q", got)
	}
	// Requests not marked critical leave the reserve; a critical one
	// takes 3 of it.
	ctx := context.Background()
	if a, _ := redisscript.AcquireCritical(ctx, e.rdb, e.ks, "shop-pay", "shop", 6, false); a.Code != redisscript.Allowed {
		t.Fatalf("6 not critical: %+v", a)
	}
	if a, _ := redisscript.AcquireCritical(ctx, e.rdb, e.ks, "shop-pay", "shop", 1, false); a.Code != redisscript.Denied {
		t.Fatalf("a seventh not critical: %+v", a)
	}
	if a, _ := redisscript.AcquireCritical(ctx, e.rdb, e.ks, "shop-pay", "shop", 3, true); a.Code != redisscript.Allowed {
		t.Fatalf("3 critical: %+v", a)
	}
	pollJS(olga, "the reserve left follows Redis", `document.querySelector("[data-live-reserve-left]").textContent.trim() === "1" &&
		document.querySelector("[data-live-tokens]").textContent.trim() === "1"`)
}
