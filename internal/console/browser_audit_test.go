package console

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/internal/audit"
)

// TestBrowserAudit reads the audit log at 1280 and 400 px wide: each
// change as a field-by-field diff, the raw JSON one click away, the bucket
// filter on part of a name, and pages both ways with the count.
func TestBrowserAudit(t *testing.T) {
	e := newEnv(t)
	e.user("ada", true)
	e.app("shop", "ada")
	b := e.bucket("shop-checkout", "shop")
	b.MaxPermits = 42
	if err := e.bkts.Update(context.Background(), e.system, b); err != nil {
		t.Fatal(err)
	}
	// 60 more entries about another bucket: more than one page.
	for i := range 60 {
		if err := audit.Write(context.Background(), e.db, e.system, audit.Entry{Action: "bucket.update", ObjectType: "bucket",
			ObjectName: "shop-images", App: "shop", Before: `{"max_permits":` + strconv.Itoa(i) + `}`, After: `{"max_permits":` + strconv.Itoa(i+1) + `}`}); err != nil {
			t.Fatal(err)
		}
	}

	browser := startBrowser(t)
	ada := newTab(t, browser, e.srv.URL)
	ada.signIn("ada")
	insideWidth := func(sel string) bool {
		ok, err := chromedp.Run(ada.ctx, chromedp.Evaluate[bool](`(function(){var n=document.querySelectorAll(`+jsString(sel)+`);
			if(!n.length)return false;for(var i=0;i<n.length;i++){var r=n[i].getBoundingClientRect();
			if(r.width<1||r.height<1||r.right>document.documentElement.clientWidth+1)return false}return true})()`))
		if err != nil {
			ada.t.Fatalf("measure %s: %v", sel, err)
		}
		return ok
	}
	for _, width := range []int64{1280, 400} {
		t.Run(map[int64]string{1280: "wide", 400: "narrow"}[width], func(t *testing.T) {
			ada.t = t
			ada.run("viewport", chromedp.EmulateViewport(width, 900))

			// The filter matches part of a name, typed in the form.
			ada.open("/audit")
			ada.fill("bucket", "checkou")
			ada.submit("form[action='/audit'] button[type=submit]")
			ada.wantText("table", "shop-checkout", "bucket.update")
			if strings.Contains(ada.text("table"), "shop-images") {
				t.Fatal("the filter on part of a name keeps another bucket")
			}
			ada.wantText(".pager", "2 entries")

			// The update shows the changed fields only, before and after.
			ada.wantText("tr:first-child .changes", "max_permits", "10", "42")
			if strings.Contains(ada.text("tr:first-child .changes"), "owner_app") {
				t.Fatal("the update shows a field that did not change")
			}
			for _, sel := range []string{"tr:first-child .change del", "tr:first-child .change ins", "tr:first-child td[data-label='Object']"} {
				if !insideWidth(sel) {
					ada.shot(t, "failed")
					t.Fatalf("%s is not visible within the page at %d px", sel, width)
				}
			}
			// The raw JSON is one click away.
			shown := func() bool {
				v, err := chromedp.Run(ada.ctx, chromedp.Evaluate[bool](`document.querySelector("tr:first-child details.raw pre.json").checkVisibility()`))
				if err != nil {
					t.Fatalf("raw JSON visibility: %v", err)
				}
				return v
			}
			if shown() {
				t.Fatal("the raw JSON shows before it is asked for")
			}
			ada.run("open raw JSON", chromedp.Click(chromedp.CSS("tr:first-child details.raw summary")))
			if !shown() || !insideWidth("tr:first-child details.raw pre.json") {
				ada.shot(t, "failed")
				t.Fatalf("the raw JSON does not show within the page at %d px", width)
			}
			ada.wantText("tr:first-child details.raw", `"max_permits": 42`)
			sideways, err := chromedp.Run(ada.ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > document.documentElement.clientWidth`))
			if err != nil || sideways {
				ada.shot(t, "failed")
				t.Fatalf("the audit page scrolls sideways at %d px", width)
			}
			ada.shot(t, "audit-diff")

			// Pages: older, then newer again.
			ada.open("/audit?bucket=shop-images")
			ada.wantText(".pager", "60 entries")
			if ada.count("a[rel=prev]") != 0 {
				t.Fatal("the first page offers newer entries")
			}
			first := ada.text("tbody tr:first-child td[data-label='Change']")
			ada.submit("a[rel=next]")
			if n := ada.count("tbody tr"); n != 10 {
				t.Fatalf("the second page has %d entries, want 10", n)
			}
			if ada.count("a[rel=next]") != 0 {
				t.Fatal("the last page offers older entries")
			}
			ada.shot(t, "audit-older")
			ada.submit("a[rel=prev]")
			if n := ada.count("tbody tr"); n != 50 {
				t.Fatalf("back on the first page: %d entries, want 50", n)
			}
			if got := ada.text("tbody tr:first-child td[data-label='Change']"); got != first {
				t.Fatalf("back on the first page, it starts with %q, want %q", got, first)
			}
			if ada.count("a[rel=prev]") != 0 || ada.count("a[rel=next]") != 1 {
				t.Fatal("back on the first page, the links are wrong")
			}
		})
	}
	ada.run("reset viewport", chromedp.ResetViewport())
}
