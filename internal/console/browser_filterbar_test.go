package console

import (
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserBucketFilterBar: at 1280 px the bucket list's filter bar is
// tidy: the search, app and sort fields share one row, and the check boxes
// and the button another; at 400 px nothing is wider than the screen.
func TestBrowserBucketFilterBar(t *testing.T) {
	e := newEnv(t)
	e.user("olga", false)
	e.app("shop", "olga")
	e.bucket("shop-checkout", "shop")
	browser := startBrowser(t)
	olga := newTab(t, browser, e.srv.URL)
	olga.signIn("olga")
	for _, width := range []int64{1280, 400} {
		olga.run("viewport", chromedp.EmulateViewport(width, 900))
		olga.open("/buckets")
		rows, err := chromedp.Run(olga.ctx, chromedp.Evaluate[[]float64](`(function(){
			var top = function(s){return Math.round(document.querySelector("form.toolbar " + s).getBoundingClientRect().top)};
			var bottom = function(s){return Math.round(document.querySelector("form.toolbar " + s).getBoundingClientRect().bottom)};
			return [bottom("#q"), bottom("#sort"), top("input[name=denied]"), top("input[name=near]"), top("button[type=submit]"),
				bottom("button[type=submit]")];
		})()`))
		if err != nil {
			t.Fatal(err)
		}
		if width == 1280 {
			// Fields on one row (same bottom), the check boxes and the
			// button together on the next.
			if rows[0] != rows[1] || rows[2] != rows[3] || rows[4] < rows[0] || rows[2] < rows[0] || rows[2] > rows[5] || rows[3] > rows[5] {
				olga.shot(t, "failed")
				t.Fatalf("filter bar rows at 1280 px: %v", rows)
			}
		}
		noSidewaysScroll(olga, width)
		olga.shot(t, "filterbar-"+map[int64]string{1280: "wide", 400: "narrow"}[width])
	}
	olga.run("reset viewport", chromedp.ResetViewport())
}
