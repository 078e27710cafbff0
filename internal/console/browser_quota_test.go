package console

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserQuotaForm: choosing the quota kind hides the rate and shows
// the period and zone, whose sentence follows the fields as typed; a
// wrong zone comes back inline, and the saved quota's page says its
// sentence; at 1280 and 400 px without sideways scrolling.
func TestBrowserQuotaForm(t *testing.T) {
	e := newEnv(t)
	e.user("olga", false)
	e.app("shop", "olga")
	browser := startBrowser(t)
	olga := newTab(t, browser, e.srv.URL)
	olga.signIn("olga")
	visible := func(id string) bool {
		t.Helper()
		v, err := chromedp.Run(olga.ctx, chromedp.Evaluate[bool](`(function(){var el = document.getElementById(`+jsString(id)+`);
			return !!el && el.getClientRects().length > 0})()`))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	choose := func(id, value string) {
		t.Helper()
		olga.run("choose "+id, chromedp.Evaluate[chromedp.Void](`(function(){var el = document.getElementById(`+jsString(id)+`);
			el.value = `+jsString(value)+`; el.dispatchEvent(new Event("change", {bubbles: true}))})()`))
	}
	for _, width := range []int64{1280, 400} {
		name := map[int64]string{1280: "wide", 400: "narrow"}[width]
		t.Run(name, func(t *testing.T) {
			olga.t = t
			olga.run("viewport", chromedp.EmulateViewport(width, 900))
			olga.open("/buckets/new?app=shop")
			if !visible("rate") || visible("quota_period") || visible("time_zone") {
				olga.shot(t, "failed")
				t.Fatal("a new token bucket's form: want the rate shown and the quota's fields hidden")
			}
			choose("kind", "quota")
			if visible("rate") || visible("preview") || !visible("quota_period") || !visible("time_zone") {
				olga.shot(t, "failed")
				t.Fatal("a quota's form: want the period and zone shown and the rate and preview hidden")
			}
			olga.run("type", chromedp.SendKeys(chromedp.ID("name"), "quota-"+name), chromedp.SendKeys(chromedp.ID("max_permits"), "10000"))
			choose("quota_period", "month")
			olga.run("type zone", chromedp.SendKeys(chromedp.ID("time_zone"), "Europe/Berlin"))
			olga.wantText("#quota-summary", "10,000 per month, resets on the 1st at 00:00 Europe/Berlin.")
			noSidewaysScroll(olga, width)
			olga.shot(t, "quota-form-"+name)

			olga.run("clear zone", chromedp.SetValue(chromedp.ID("time_zone"), "Europe/Atlantis"))
			olga.submit("main form .actions .btn-primary")
			olga.wantText("#time_zone-error", `unknown time zone "Europe/Atlantis"`)
			if !visible("quota_period") || visible("rate") {
				olga.shot(t, "failed")
				t.Fatal("the refused quota's form lost its fields")
			}
			noSidewaysScroll(olga, width)
			olga.run("fix zone", chromedp.SetValue(chromedp.ID("time_zone"), "Europe/Berlin"))
			olga.submit("main form .actions .btn-primary")
			olga.wantText("h1", "quota-"+name)
			olga.wantText("#quota-def", "10,000 per month, resets on the 1st at 00:00 Europe/Berlin")
			if got := olga.text("main"); strings.Contains(got, "tokens available") {
				t.Fatalf("a quota's page speaks of tokens: %q", got)
			}
			noSidewaysScroll(olga, width)
			olga.shot(t, "quota-page-"+name)
		})
	}
	olga.run("reset viewport", chromedp.ResetViewport())
}
