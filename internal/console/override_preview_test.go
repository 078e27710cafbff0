package console

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/internal/buckets"
)

// The override forms say what the override will do, as the bucket form
// does: the limit in plain words, and a preview of a traffic pattern
// against it that saves nothing. A slow rate reads as given ("1 per hour").
// Invalid input comes back inline; viewers cannot preview.
func TestOverridePreview(t *testing.T) {
	e, ob, vb := bucketFixture(t)
	e.keyedBucket("per-key", "alpha")
	o := e.newOverride("per-key", "tenant:acme")
	ctx := context.Background()
	edit := fmt.Sprintf("/buckets/per-key/overrides/%d/edit", o.ID)

	// The summary, on the add form (the bucket's page) and the edit page.
	r := ob.get("/buckets/per-key?key=someone")
	wantStatus(t, "bucket page", r, http.StatusOK)
	wantBody(t, "bucket page", r, `<output id="o_limit-summary" for="o_max_permits o_rate" data-summary`,
		"bursts of up to 10, then 100 per minute: 6,000 per hour sustained", `formaction="/buckets/per-key/overrides#preview"`)
	r = ob.get(edit)
	wantBody(t, "edit page", r, "bursts of up to 5, then 1 per second: 60 per minute sustained", `name="preview"`)

	pattern := url.Values{"steady": {"1"}, "burst": {"5"}, "every": {"10"}, "duration": {"30"}}
	form := func(v url.Values) url.Values {
		for k, vs := range pattern {
			v[k] = vs
		}
		v.Set("preview", "1")
		return v
	}
	// Preview a new override: the page comes back with the form as typed
	// and the preview; nothing is added.
	r = ob.post("/buckets/per-key/overrides", form(url.Values{"match": {"exact"}, "key": {"vip:1"}, "max_permits": {"3"}, "rate": {"1/hour"}}))
	wantStatus(t, "preview new", r, http.StatusOK)
	wantBody(t, "preview new", r, `class="chart preview-chart"`, "sustained: 1 per hour", `value="vip:1"`, `value="1/hour"`,
		"bursts of up to 3, then 1 per hour: 24 per day sustained", " allowed, ")
	if strings.Contains(r.body, "0 per second") {
		t.Error("the preview of 1 per hour says 0 per second")
	}
	// Invalid: inline errors, as typed.
	r = ob.post("/buckets/per-key/overrides", form(url.Values{"match": {"exact"}, "key": {"vip:1"}, "max_permits": {"3"}, "rate": {"soon"}}))
	wantStatus(t, "preview invalid", r, http.StatusUnprocessableEntity)
	wantBody(t, "preview invalid", r, `id="rate-error"`, `value="soon"`)
	if strings.Contains(r.body, "preview-chart") {
		t.Error("an invalid limit is previewed")
	}
	if page, err := e.bkts.ListOverrides(ctx, "per-key", buckets.OverrideFilter{}); err != nil || page.Total != 1 {
		t.Fatalf("after previews: %+v %v, want the one override", page, err)
	}

	// Preview an edit: the edit page comes back as typed; nothing is saved.
	r = ob.post(edit, form(url.Values{"version": {"1"}, "max_permits": {"50"}, "rate": {"2 per hour"}}))
	wantStatus(t, "preview edit", r, http.StatusOK)
	wantBody(t, "preview edit", r, `class="chart preview-chart"`, "sustained: 2 per hour", `value="50"`,
		`name="version" value="1"`, "bursts of up to 50, then 2 per hour: 48 per day sustained")
	if cur, err := e.bkts.GetOverride(ctx, "per-key", o.ID); err != nil || cur.Version != 1 || cur.MaxPermits != 5 {
		t.Fatalf("after an edit's preview: %+v %v, want version 1 unchanged", cur, err)
	}
	if n := e.auditCount("override.update"); n != 0 {
		t.Errorf("a preview wrote %d audit entries", n)
	}

	// A viewer may not preview (the same role as saving).
	if r := vb.post("/buckets/per-key/overrides", form(url.Values{"match": {"exact"}, "key": {"x"}, "max_permits": {"3"}, "rate": {"1/s"}})); r.status != http.StatusForbidden {
		t.Errorf("a viewer's preview: %d, want 403", r.status)
	}
}

// TestBrowserOverridePreview previews a new override and an override's
// edit in Chromium at 1280 and 400 px: the preview sits above the save
// button, its chart's title fits, a slow rate reads "1 per hour", the
// summary follows what is typed, and nothing scrolls sideways.
func TestBrowserOverridePreview(t *testing.T) {
	e := newEnv(t)
	e.user("olga", false)
	e.app("shop", "olga")
	e.keyedBucket("per-user", "shop")
	o := e.newOverride("per-user", "tenant:acme")
	edit := fmt.Sprintf("/buckets/per-user/overrides/%d/edit", o.ID)

	browser := startBrowser(t)
	olga := newTab(t, browser, e.srv.URL)
	olga.signIn("olga")
	check := func(t *testing.T, width int64, save string) {
		t.Helper()
		pos, err := chromedp.Run(olga.ctx, chromedp.Evaluate[[]float64](`[document.querySelector("figure.preview-chart").getBoundingClientRect().bottom,
			document.querySelector(`+jsString(save)+`).getBoundingClientRect().top]`))
		if err != nil || len(pos) != 2 || pos[0] > pos[1] {
			olga.shot(t, "failed")
			t.Fatalf("preview bottom and save button top at %v (%v): want the preview above", pos, err)
		}
		fits, err := chromedp.Run(olga.ctx, chromedp.Evaluate[bool](`Array.from(document.querySelectorAll("figure.preview-chart svg")).filter(function(c){
			return c.getBoundingClientRect().width > 0}).every(function(svg){var b = svg.querySelector(".chart-title").getBBox();
			return b.x + b.width <= svg.viewBox.baseVal.width})`))
		if err != nil || !fits {
			olga.shot(t, "failed")
			t.Fatalf("the preview's title is cut off at %d px (%v)", width, err)
		}
		if !visibleIn(olga, "figure.preview-chart") {
			olga.shot(t, "failed")
			t.Fatalf("the preview does not fit the page at %d px", width)
		}
		text := olga.text("figure.preview-chart")
		if !strings.Contains(text, "1 per hour") || strings.Contains(text, "0 per second") {
			olga.shot(t, "failed")
			t.Fatalf("the preview says %q", text)
		}
		olga.wantText("#o_limit-summary", "up to 3, then 1 per hour: 24 per day sustained")
		noSidewaysScroll(olga, width)
	}
	for _, width := range []int64{1280, 400} {
		name := map[int64]string{1280: "wide", 400: "narrow"}[width]
		t.Run(name, func(t *testing.T) {
			olga.t = t
			olga.run("viewport", chromedp.EmulateViewport(width, 900))

			olga.open("/buckets/per-user")
			olga.fill("key", "vip:"+name, "o_max_permits", "3", "o_rate", "1/hour", "steady", "1", "duration", "30")
			olga.submit("form[action='/buckets/per-user/overrides'] button[name=preview]")
			check(t, width, "form[action='/buckets/per-user/overrides'] .actions .btn-primary")
			olga.shot(t, "override-new-preview-"+name)
			// Adding it from there saves what was previewed.
			olga.submit("form[action='/buckets/per-user/overrides'] .actions .btn-primary")
			olga.wantText(".flash", "added")
			olga.wantText("#overrides table", "vip:"+name)

			olga.open(edit)
			olga.fill("o_max_permits", "3", "o_rate", "1/hour", "steady", "1", "duration", "30")
			olga.submit("form[action='" + edit + "'] button[name=preview]")
			check(t, width, "form[action='"+edit+"'] .actions .btn-primary")
			olga.wantText("h1", "tenant:acme")
			olga.shot(t, "override-edit-preview-"+name)
		})
	}
	olga.run("reset viewport", chromedp.ResetViewport())
}
