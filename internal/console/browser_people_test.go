package console

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/internal/rbac"
)

// fits reports whether every element matching sel is drawn, with a size,
// inside the page's width (nothing cut off or pushed sideways).
func (tb *tab) fits(sel string) bool {
	tb.t.Helper()
	ok, err := chromedp.Run(tb.ctx, chromedp.Evaluate[bool](`(function(){var n=document.querySelectorAll(`+jsString(sel)+`);
		if(!n.length)return false;for(var i=0;i<n.length;i++){var r=n[i].getBoundingClientRect();
		if(r.width<1||r.height<1||r.left<-1||r.right>document.documentElement.clientWidth+1)return false}return true})()`))
	if err != nil {
		tb.t.Fatalf("measure %s: %v", sel, err)
	}
	return ok
}

// mustFit fails unless every selector fits, and the page does not scroll
// sideways.
func (tb *tab) mustFit(width int64, sels ...string) {
	tb.t.Helper()
	for _, sel := range sels {
		if !tb.fits(sel) {
			tb.shot(tb.t, "failed")
			tb.t.Fatalf("%s is not shown within the page at %d px", sel, width)
		}
	}
	sideways, err := chromedp.Run(tb.ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > document.documentElement.clientWidth`))
	if err != nil || sideways {
		tb.shot(tb.t, "failed")
		tb.t.Fatalf("the page scrolls sideways at %d px (%v)", width, err)
	}
}

func (tb *tab) eval(js string) bool {
	tb.t.Helper()
	ok, err := chromedp.Run(tb.ctx, chromedp.Evaluate[bool](js))
	if err != nil {
		tb.t.Fatalf("evaluate %s: %v", js, err)
	}
	return ok
}

// TestBrowserFormsAndPeople drives the forms about people and access in
// Chromium at 1280 and 400 px: the allowed-apps picker's type-to-filter,
// removing a member after a confirmation, the role descriptions, the
// viewer's read-only hint, an API token's expiry and a user's change of
// their own password. Each step saves a screenshot.
func TestBrowserFormsAndPeople(t *testing.T) {
	e := newEnv(t)
	e.user("olga", false)
	e.user("vera", false)
	e.user("sam", false)
	e.app("shop", "olga")
	e.grant("vera", "shop", rbac.RoleViewer)
	for i := range 40 {
		e.app(fmt.Sprintf("team-%02d", i), "sam")
	}
	e.bucket("shop-api", "shop")

	browser := startBrowser(t)
	olga := newTab(t, browser, e.srv.URL)
	olga.signIn("olga")
	vera := newTab(t, browser, e.srv.URL)
	vera.signIn("vera")

	for _, width := range []int64{1280, 400} {
		name := map[int64]string{1280: "wide", 400: "narrow"}[width]
		t.Run(name, func(t *testing.T) {
			olga.t, vera.t = t, t
			olga.run("viewport", chromedp.EmulateViewport(width, 900))
			vera.run("viewport", chromedp.EmulateViewport(width, 900))

			t.Run("allowed apps picker", func(t *testing.T) {
				olga.t = t
				pick := map[int64]string{1280: "team-07", 400: "team-23"}[width]
				olga.open("/buckets/shop-api/edit")
				olga.mustFit(width, "#allowed_apps_filter", "#allowed_apps_list")
				if n := olga.count("#allowed_apps_list li[data-app]:not([hidden])"); n != 41 {
					t.Fatalf("%d apps listed before filtering, want 41", n)
				}
				olga.run("tick "+pick, chromedp.Click(chromedp.CSS("input[name=allowed_apps][value='"+pick+"']")))
				if olga.count("input[name=allowed_apps][value='shop']:checked") != 1 {
					t.Fatal("the bucket's allowed app is not ticked")
				}
				olga.run("filter", chromedp.SendKeys(chromedp.ID("allowed_apps_filter"), "team-1"))
				// team-10 to team-19, plus the ticked ones (shop, pick, and
				// in the second round the first round's pick).
				ticked := olga.count("input[name=allowed_apps]:checked")
				if n := olga.count("#allowed_apps_list li[data-app]:not([hidden])"); n != 10+ticked {
					olga.shot(t, "failed")
					t.Fatalf("%d apps shown for \"team-1\", want the 10 matching and the %d ticked", n, ticked)
				}
				if olga.count("li[data-app='"+pick+"']:not([hidden])") != 1 || olga.count("li[data-app='team-30']:not([hidden])") != 0 {
					t.Fatal("the filter hides a ticked app or shows one that does not match")
				}
				olga.wantText("[data-picker-count]", fmt.Sprintf("%d of 41 apps shown, %d ticked", 10+ticked, ticked))
				olga.mustFit(width, "li[data-app='team-15']", "li[data-app='"+pick+"']")
				olga.shot(t, "picker-filtered")
				// Enter in the filter box does not save.
				olga.run("mark the page", chromedp.Evaluate[chromedp.Void](`window.samePage = true`))
				olga.run("enter", chromedp.SendKeys(chromedp.ID("allowed_apps_filter"), "\r"))
				olga.run("settle", chromedp.Sleep(300*time.Millisecond))
				if !olga.eval(`window.samePage === true`) {
					t.Fatal("Enter in the filter box submitted the form")
				}
				olga.submit("form[action='/buckets/shop-api'] button.btn-primary")
				olga.wantText(".flash", "saved")
				b, err := e.bkts.Get(context.Background(), "shop-api")
				if err != nil || !slices.Contains(b.AllowedApps, pick) || !slices.Contains(b.AllowedApps, "shop") {
					t.Fatalf("allowed apps saved %v (%v), want %s and shop among them", b.AllowedApps, err, pick)
				}
			})

			t.Run("remove a member after confirming", func(t *testing.T) {
				olga.t = t
				member := "m-" + name
				e.user(member, false)
				e.grant(member, "shop", rbac.RoleViewer)
				olga.open("/apps/shop")
				olga.mustFit(width, "a[href='/apps/shop/members/"+member+"/revoke']")
				olga.submit("a[href='/apps/shop/members/" + member + "/revoke']")
				olga.wantText("h1", "Remove "+member+" from shop?")
				olga.wantText("main", "is viewer of shop", "Keep "+member)
				olga.mustFit(width, "form[action='/apps/shop/members/"+member+"/revoke'] button")
				if _, ok := e.enf.Apps(member)["shop"]; !ok {
					t.Fatal("the confirmation page removed the member")
				}
				olga.shot(t, "confirm-remove")
				olga.submit("form[action='/apps/shop/members/" + member + "/revoke'] button[type=submit]")
				olga.wantText(".flash", member+" no longer has a role on shop.")
				if _, ok := e.enf.Apps(member)["shop"]; ok {
					t.Fatal("the member was not removed")
				}
			})

			t.Run("role descriptions", func(t *testing.T) {
				olga.t = t
				olga.open("/apps/shop")
				olga.mustFit(width, "#role", "#role-help")
				olga.wantText("#role-help", "viewer", "changes nothing", "owner", "manages its members", "admin")
				if !olga.eval(`document.querySelector("#role-help [data-role=viewer]").classList.contains("chosen")`) {
					t.Fatal("the chosen role's description is not marked")
				}
				olga.run("choose owner", chromedp.Evaluate[chromedp.Void](`(function(){var s=document.getElementById("role");
					s.value="owner";s.dispatchEvent(new Event("change"))})()`))
				if !olga.eval(`document.querySelector("#role-help [data-role=owner]").classList.contains("chosen") &&
					!document.querySelector("#role-help [data-role=viewer]").classList.contains("chosen")`) {
					t.Fatal("choosing owner does not mark its description")
				}
				olga.shot(t, "roles")
			})

			t.Run("viewer's read-only hint", func(t *testing.T) {
				vera.t = t
				vera.open("/apps/shop")
				vera.mustFit(width, "#readonly-hint")
				vera.wantText("#readonly-hint", "Read only.", "You are viewer of shop", "ask olga")
				if vera.count("a[href^='/apps/shop/members/']") != 0 || vera.count("form[action='/apps/shop/members']") != 0 {
					t.Fatal("the viewer is offered member changes")
				}
				vera.shot(t, "viewer-app")
				vera.open("/buckets/shop-api")
				vera.mustFit(width, "#readonly-hint")
				vera.wantText("#readonly-hint", "Read only.", "Only owners of shop and admins can edit or delete it.")
				if vera.count("a[href='/buckets/shop-api/edit']") != 0 {
					t.Fatal("the viewer is offered to edit")
				}
				vera.shot(t, "viewer-bucket")
			})

			t.Run("token expiry", func(t *testing.T) {
				olga.t = t
				olga.open("/tokens")
				olga.mustFit(width, "#name", "#expires")
				if !olga.eval(`document.querySelector("[data-show-when='expires=date']").hidden`) {
					t.Fatal("the date field shows while no date is chosen")
				}
				olga.run("choose a date", chromedp.Evaluate[chromedp.Void](`(function(){var s=document.getElementById("expires");
					s.value="date";s.dispatchEvent(new Event("change"))})()`))
				olga.mustFit(width, "#expires_at")
				olga.fill("name", "deploy-"+name, "expires_at", "2001-01-01")
				olga.submit("form[action='/tokens'] button[type=submit]")
				olga.wantText("#expires_at-error", "must be in the future")
				olga.mustFit(width, "#expires_at", "#expires_at-error")
				olga.shot(t, "token-expiry-error")
				day := time.Now().UTC().AddDate(0, 0, 20).Format("2006-01-02")
				olga.fill("expires_at", day)
				olga.submit("form[action='/tokens'] button[type=submit]")
				olga.wantText("#new-token", "slc_")
				olga.wantText("table", "deploy-"+name, "expires in")
				olga.mustFit(width, "[data-expiry]", "form[action$='/revoke'] button")
				olga.shot(t, "token-expiry")
			})

			t.Run("change own password", func(t *testing.T) {
				who := "pat-" + name
				e.user(who, false)
				pat := newTab(t, browser, e.srv.URL)
				pat.run("viewport", chromedp.EmulateViewport(width, 900))
				pat.signIn(who)
				elsewhere := newTab(t, browser, e.srv.URL)
				elsewhere.signIn(who)

				pat.open("/buckets")
				pat.mustFit(width, ".who a[href='/account']")
				pat.submit(".who a[href='/account']")
				pat.wantText("h1", "Your account")
				pat.fill("current_password", "not my password", "new_password", "a brand new passphrase",
					"repeat_password", "a brand new passphrase")
				pat.submit("form[action='/account/password'] button[type=submit]")
				pat.wantText("#current_password-error", "is not your current password")
				pat.mustFit(width, "#current_password-error")
				pat.shot(t, "password-error")
				pat.fill("current_password", testPassword, "new_password", "a brand new passphrase",
					"repeat_password", "a brand new passphrase")
				pat.submit("form[action='/account/password'] button[type=submit]")
				pat.wantText(".flash", "Password changed.")
				pat.shot(t, "password-changed")
				pat.open("/buckets")
				pat.wantText("h1", "Buckets")
				elsewhere.open("/buckets")
				elsewhere.wantText("h1", "Sign in")
				if !strings.Contains(elsewhere.text("main"), "Sign in") {
					t.Fatal("the other session was not ended")
				}
			})
		})
	}
}
