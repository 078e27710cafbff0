package console

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/internal/buckets"
)

// newOverride creates an exact override of bucket for key: 5 tokens, 1 per second.
func (e *env) newOverride(bucket, key string) *buckets.Override {
	e.t.Helper()
	o := &buckets.Override{Bucket: bucket, Match: buckets.MatchExact, Key: key, MaxPermits: 5,
		Rate: buckets.Rate{PermitsMicro: 1_000_000, Period: time.Second}}
	if err := e.bkts.CreateOverride(context.Background(), e.system, o); err != nil {
		e.t.Fatal(err)
	}
	return o
}

// The edit page of an override: invalid input comes back inline as typed,
// a save redirects (POST-redirect-GET) and is audited, an edit based on an
// older version changes nothing and shows the newer values, and viewers
// get neither the page nor the link.
func TestOverrideEditPage(t *testing.T) {
	e, ob, vb := bucketFixture(t)
	e.keyedBucket("per-key", "alpha")
	ctx := context.Background()
	o := e.newOverride("per-key", "tenant:acme")
	path := fmt.Sprintf("/buckets/per-key/overrides/%d/edit", o.ID)

	r := ob.get("/buckets/per-key")
	wantBody(t, "link", r, `href="`+path+`"`)
	if r := vb.get("/buckets/per-key"); strings.Contains(r.body, path) {
		t.Error("a viewer is offered the edit page")
	}
	wantStatus(t, "viewer page", vb.get(path), http.StatusForbidden)
	wantStatus(t, "viewer post", vb.post(path, url.Values{"version": {"1"}, "max_permits": {"9"}, "rate": {"1/s"}}), http.StatusForbidden)
	wantStatus(t, "bad id", ob.get("/buckets/per-key/overrides/abc/edit"), http.StatusNotFound)
	wantStatus(t, "missing id", ob.get("/buckets/per-key/overrides/999999/edit"), http.StatusNotFound)

	r = ob.get(path)
	wantStatus(t, "page", r, http.StatusOK)
	wantBody(t, "page", r, "Edit the override for “tenant:acme”", `name="version" value="1"`, `value="5"`, `value="1/s"`,
		"editing version 1")

	r = ob.post(path, url.Values{"version": {"1"}, "max_permits": {"lots"}, "rate": {"fast"}, "description": {"vip"}})
	wantStatus(t, "invalid", r, http.StatusUnprocessableEntity)
	wantBody(t, "invalid", r, `id="max_permits-error"`, `id="rate-error"`, `value="lots"`, `value="fast"`, `value="vip"`,
		`name="version" value="1"`)

	r = ob.post(path, url.Values{"version": {"1"}, "max_permits": {"500"}, "rate": {"500/min"}, "description": {"vip"},
		"shadow": {"true"}})
	wantStatus(t, "save", r, http.StatusSeeOther)
	if loc := r.location; !strings.HasPrefix(loc, "/buckets/per-key?oq=tenant") {
		t.Errorf("save redirects to %q", loc)
	}
	got, err := e.bkts.GetOverride(ctx, "per-key", o.ID)
	if err != nil || got.Version != 2 || got.MaxPermits != 500 || got.Rate.String() != "500/min" || !got.Shadow ||
		got.Description != "vip" {
		t.Fatalf("saved %+v %v", got, err)
	}
	if n := e.auditCount("override.update"); n != 1 {
		t.Errorf("%d audit rows of override.update, want 1", n)
	}
	wantBody(t, "shadow badge", ob.get("/buckets/per-key?oq=tenant"), "Shadow")

	// Saving the same values again changes nothing.
	r = ob.post(path, url.Values{"version": {"2"}, "max_permits": {"500"}, "rate": {"500/min"}, "description": {"vip"},
		"shadow": {"true"}})
	wantStatus(t, "unchanged", r, http.StatusSeeOther)
	if n := e.auditCount("override.update"); n != 1 {
		t.Errorf("an unchanged save was audited: %d rows", n)
	}

	// Someone else saves version 3; an edit of version 2 writes nothing.
	got.MaxPermits = 7
	if err := e.bkts.UpdateOverride(ctx, e.system, got); err != nil {
		t.Fatal(err)
	}
	r = ob.post(path, url.Values{"version": {"2"}, "max_permits": {"600"}, "rate": {"600/min"}})
	wantStatus(t, "stale", r, http.StatusPreconditionFailed)
	wantBody(t, "stale", r, `id="stale"`, "was changed by someone else (now version 3, your change was based on version 2)", `name="version" value="3"`, `value="600"`, "<dd>7</dd>")
	if cur, _ := e.bkts.GetOverride(ctx, "per-key", o.ID); cur.MaxPermits != 7 {
		t.Fatalf("a stale edit wrote: %+v", cur)
	}
	// A form without its version matches no version.
	wantStatus(t, "no version", ob.post(path, url.Values{"max_permits": {"600"}, "rate": {"600/min"}}), http.StatusPreconditionFailed)
	// Saving again, deliberately, on the newer version.
	r = ob.post(path, url.Values{"version": {"3"}, "max_permits": {"600"}, "rate": {"600/min"}})
	wantStatus(t, "save again", r, http.StatusSeeOther)
	if cur, _ := e.bkts.GetOverride(ctx, "per-key", o.ID); cur.MaxPermits != 600 || cur.Shadow || cur.Version != 4 {
		t.Fatalf("saved again: %+v", cur)
	}
}

// TestBrowserOverrideEdit edits an override in Chromium at 1280 and 400 px:
// the edit link on the bucket page, an inline error, a save that lands on
// the bucket page with the new limit, and a conflict from another session.
func TestBrowserOverrideEdit(t *testing.T) {
	e := newEnv(t)
	e.user("olga", false)
	e.app("shop", "olga")
	e.keyedBucket("per-user", "shop")
	o := e.newOverride("per-user", "tenant:acme")
	path := fmt.Sprintf("/buckets/per-user/overrides/%d/edit", o.ID)

	browser := startBrowser(t)
	olga := newTab(t, browser, e.srv.URL)
	olga.signIn("olga")
	for i, width := range []int64{1280, 400} {
		t.Run(map[int64]string{1280: "wide", 400: "narrow"}[width], func(t *testing.T) {
			olga.t = t
			olga.run("viewport", chromedp.EmulateViewport(width, 900))
			olga.open("/buckets/per-user")
			olga.submit(fmt.Sprintf("a[href='%s']", path))
			olga.wantText("h1", "Edit the override for “tenant:acme”")

			olga.fill("o_max_permits", "0")
			olga.submit("form[action='" + path + "'] .actions button[type=submit]")
			olga.wantText("#max_permits-error", "1")
			if olga.count("#o_max_permits[aria-invalid=true]") != 1 {
				t.Fatal("the invalid field is not marked")
			}
			sideways, err := chromedp.Run(olga.ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > document.documentElement.clientWidth`))
			if err != nil || sideways {
				olga.shot(t, "failed")
				t.Fatalf("the edit page scrolls sideways at %d px", width)
			}
			olga.shot(t, "override-invalid")

			want := fmt.Sprint(100 + i)
			olga.fill("o_max_permits", want, "o_rate", "100/min")
			olga.submit("form[action='" + path + "'] .actions button[type=submit]")
			olga.wantText(".flash", "saved")
			olga.wantText("tr[data-override]", "tenant:acme", want)
			olga.shot(t, "override-saved")

			// Another session saves while this page is open.
			olga.open(path)
			cur, err := e.bkts.GetOverride(context.Background(), "per-user", o.ID)
			if err != nil {
				t.Fatal(err)
			}
			cur.Description = "changed elsewhere"
			if err := e.bkts.UpdateOverride(context.Background(), e.system, cur); err != nil {
				t.Fatal(err)
			}
			olga.fill("o_max_permits", "999")
			olga.submit("form[action='" + path + "'] .actions button[type=submit]")
			olga.wantText("#stale", "was changed by someone else", "changed elsewhere")
			olga.shot(t, "override-conflict")
			olga.submit("form[action='" + path + "'] .actions button[type=submit]")
			olga.wantText("tr[data-override]", "999")
		})
	}
}
