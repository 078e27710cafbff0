package console

import (
	"context"
	"strings"
	"testing"
	"time"

	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// TestBrowserPreviewAboveSave: the bucket form's preview is drawn above
// its save button, its chart names a slow rate as given (not "0 per
// second"), and Enter in a field still saves; at 1280 and 400 px.
func TestBrowserPreviewAboveSave(t *testing.T) {
	e := newEnv(t)
	e.user("olga", false)
	e.app("shop", "olga")
	browser := startBrowser(t)
	olga := newTab(t, browser, e.srv.URL)
	olga.signIn("olga")
	for _, width := range []int64{1280, 400} {
		name := map[int64]string{1280: "wide", 400: "narrow"}[width]
		t.Run(name, func(t *testing.T) {
			olga.t = t
			olga.run("viewport", chromedp.EmulateViewport(width, 900))
			olga.open("/buckets/new?app=shop")
			olga.fill("name", "shop-"+name, "max_permits", "3", "rate", "1/hour", "steady", "1", "duration", "30")
			olga.submit("#preview button[name=preview]")
			pos, err := chromedp.Run(olga.ctx, chromedp.Evaluate[[]float64](`[document.querySelector("figure.preview-chart").getBoundingClientRect().bottom,
				document.querySelector("main form .actions .btn-primary").getBoundingClientRect().top]`))
			if err != nil || len(pos) != 2 || pos[0] > pos[1] {
				olga.shot(t, "failed")
				t.Fatalf("preview bottom at %v, save button top at %v (%v): want the preview above", pos[0], pos[1], err)
			}
			fits, err := chromedp.Run(olga.ctx, chromedp.Evaluate[bool](`Array.from(document.querySelectorAll("figure.preview-chart svg")).filter(function(c){
				return c.getBoundingClientRect().width > 0}).every(function(svg){var b = svg.querySelector(".chart-title").getBBox();
				return b.x + b.width <= svg.viewBox.baseVal.width})`))
			if err != nil || !fits {
				olga.shot(t, "failed")
				t.Fatalf("the preview's title is cut off at %d px (%v)", width, err)
			}
			text := olga.text("figure.preview-chart")
			if !strings.Contains(text, "1 per hour") || strings.Contains(text, "0 per second") {
				olga.shot(t, "failed")
				t.Fatalf("the preview says %q", text)
			}
			noSidewaysScroll(olga, width)
			olga.shot(t, "preview-"+name)
			// Enter in a field saves the bucket.
			ctx, cancel := context.WithTimeout(olga.ctx, 20*time.Second)
			defer cancel()
			if _, err := chromedp.Run(ctx, chromedp.WaitEvent(cdppage.LoadEventFired, nil, chromedp.SendKeys(chromedp.ID("max_permits"), "\r"))); err != nil {
				t.Fatal(err)
			}
			olga.wantText("h1", "shop-"+name)
		})
	}
	olga.run("reset viewport", chromedp.ResetViewport())
}
