package console

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/client/usage"
	"github.com/sluicehq/sluice/internal/testenv"
)

// chromium finds Debian's Chromium, or skips (fails under
// SLUICE_TEST_REQUIRE=1) when it is not installed.
func chromium(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("SLUICE_TEST_CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if p == "" {
			continue
		}
		if _, err := exec.LookPath(p); err == nil {
			return p
		}
	}
	testenv.Unavailable(t, "chromium")
	return ""
}

// startBrowser starts a headless Chromium with a fresh profile and returns
// the context of its first tab.
func startBrowser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(cancel)
	// The first action on a context starts the browser (or opens the tab)
	// and binds its life to that context: it must not run on a shorter one.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// tab drives one browser tab with its own cookies.
type tab struct {
	t    *testing.T
	ctx  context.Context
	base string
}

// newTab opens a tab in a new browser context: a separate cookie jar, as
// if another person used another browser.
func newTab(t *testing.T, browser context.Context, base string) *tab {
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	return &tab{t: t, ctx: ctx, base: base}
}

func (tb *tab) run(what string, steps ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		tb.shot(tb.t, "failed")
		tb.t.Fatalf("%s: %v", what, err)
	}
}

func (tb *tab) open(path string) {
	tb.t.Helper()
	tb.run("open "+path, chromedp.Navigate(tb.base+path))
}

// fill sets form fields by id.
func (tb *tab) fill(fields ...string) {
	tb.t.Helper()
	var steps []chromedp.Action[chromedp.Void]
	for i := 0; i+1 < len(fields); i += 2 {
		steps = append(steps, chromedp.SetValue(chromedp.ID(fields[i]), fields[i+1]))
	}
	tb.run("fill "+strings.Join(fields, " "), steps...)
}

// submit clicks a button and waits for the page it leads to.
func (tb *tab) submit(button string) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 20*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.WaitEvent(cdppage.LoadEventFired, nil, chromedp.Click(chromedp.CSS(button)))); err != nil {
		tb.shot(tb.t, "failed")
		tb.t.Fatalf("submit %s: %v", button, err)
	}
}

// text returns the visible text of the first element matching sel.
func (tb *tab) text(sel string) string {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 10*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		tb.shot(tb.t, "failed")
		tb.t.Fatalf("read %s: %v", sel, err)
	}
	return s
}

func (tb *tab) wantText(sel string, parts ...string) {
	tb.t.Helper()
	got := tb.text(sel)
	for _, p := range parts {
		if !strings.Contains(got, p) {
			tb.shot(tb.t, "failed")
			tb.t.Fatalf("%s shows %q, want it to contain %q", sel, got, p)
		}
	}
}

func (tb *tab) count(sel string) int {
	tb.t.Helper()
	n, err := chromedp.Run(tb.ctx, chromedp.Evaluate[int](`document.querySelectorAll(`+jsString(sel)+`).length`))
	if err != nil {
		tb.t.Fatalf("count %s: %v", sel, err)
	}
	return n
}

func jsString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// shot saves a screenshot of the tab in t's artifact directory.
func (tb *tab) shot(t *testing.T, name string) {
	ctx, cancel := context.WithTimeout(tb.ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return
	}
	path := filepath.Join(t.ArtifactDir(), name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Logf("save screenshot: %v", err)
		return
	}
	t.Logf("screenshot: %s", path)
}

func (tb *tab) signIn(user string) {
	tb.t.Helper()
	tb.open("/login")
	tb.fill("username", user, "password", testPassword)
	tb.submit("form[action='/login'] button[type=submit]")
}

// TestBrowser walks the console the way a team uses it, in Chromium: sign
// in, register an app, add a viewer, create a bucket (failing validation
// first), edit it, run into a conflict from a second session, see that the
// viewer can read but not edit, and delete it. Each step saves a screenshot.
func TestBrowser(t *testing.T) {
	e := newEnv(t)
	e.user("olga", false)
	e.user("vera", false)
	e.user("ada", true)
	browser := startBrowser(t)
	olga := newTab(t, browser, e.srv.URL)

	t.Run("sign in", func(t *testing.T) {
		olga.t = t
		olga.open("/buckets")
		olga.wantText("h1", "Sign in")
		olga.shot(t, "sign-in")
		olga.fill("username", "olga", "password", testPassword)
		olga.submit("form[action='/login'] button[type=submit]")
		olga.wantText("h1", "Buckets")
		olga.wantText(".who", "olga")
	})

	t.Run("register an app", func(t *testing.T) {
		olga.t = t
		olga.open("/apps/new")
		olga.fill("name", "shop", "description", "The shop front and its checkout")
		olga.submit("form[action='/apps'] button[type=submit]")
		olga.wantText("h1", "shop")
		olga.wantText(".flash", "You are its owner")
		olga.shot(t, "app")
	})

	t.Run("add a viewer", func(t *testing.T) {
		olga.t = t
		olga.fill("user", "vera", "role", "viewer")
		olga.submit("form[action='/apps/shop/members'] button[type=submit]")
		olga.wantText(".flash", "vera is now viewer of shop")
		olga.wantText("table", "vera", "viewer")
		olga.shot(t, "members")
	})

	t.Run("create a bucket after a validation error", func(t *testing.T) {
		olga.t = t
		olga.open("/buckets/new")
		olga.fill("name", "shop-checkout", "owner_app", "shop", "max_permits", "100", "rate", "as fast as possible",
			"description", "Calls to the payment provider")
		olga.submit("form[action='/buckets'] .actions button[type=submit]")
		olga.wantText("#rate-error", "must look like")
		if olga.count("#rate[aria-invalid='true'][aria-describedby~='rate-error']") != 1 {
			t.Fatal("the rate field is not marked invalid and tied to its message")
		}
		olga.shot(t, "validation")
		olga.fill("rate", "100 per minute")
		olga.submit("form[action='/buckets'] .actions button[type=submit]")
		olga.wantText("h1", "shop-checkout")
		olga.wantText("main", "100 per minute", "100 tokens")
		olga.shot(t, "bucket")
	})

	t.Run("edit", func(t *testing.T) {
		olga.t = t
		olga.open("/buckets/shop-checkout/edit")
		olga.fill("max_permits", "250", "rate", "5/s")
		olga.submit("form[action='/buckets/shop-checkout'] .actions button[type=submit]")
		olga.wantText(".flash", "saved (version 2)")
		olga.wantText("main", "250 tokens", "5 per second")
	})

	t.Run("conflict from a second session", func(t *testing.T) {
		olga.t = t
		ada := newTab(t, browser, e.srv.URL)
		ada.signIn("ada")
		// Both open the form at version 2; olga saves first.
		ada.open("/buckets/shop-checkout/edit")
		olga.open("/buckets/shop-checkout/edit")
		olga.fill("max_permits", "300")
		olga.submit("form[action='/buckets/shop-checkout'] .actions button[type=submit]")
		olga.wantText(".flash", "version 3")

		ada.fill("max_permits", "1", "description", "ada's change")
		ada.submit("form[action='/buckets/shop-checkout'] .actions button[type=submit]")
		ada.wantText("#stale", "was changed by someone else", "olga saved version 3", "300")
		ada.shot(t, "conflict")
		b, err := e.bkts.Get(context.Background(), "shop-checkout")
		if err != nil || b.MaxPermits != 300 || b.Description == "ada's change" {
			t.Fatalf("the stale save overwrote the bucket: %+v %v", b, err)
		}
	})

	t.Run("viewer sees but cannot edit", func(t *testing.T) {
		vera := newTab(t, browser, e.srv.URL)
		vera.signIn("vera")
		vera.open("/buckets")
		vera.wantText("table", "shop-checkout")
		if vera.count("a[href='/buckets/new']") != 0 {
			t.Fatal("the viewer is offered to create a bucket")
		}
		vera.open("/buckets/shop-checkout")
		vera.wantText("h1", "shop-checkout")
		if vera.count("a[href='/buckets/shop-checkout/edit']") != 0 {
			t.Fatal("the viewer is offered to edit")
		}
		vera.shot(t, "viewer")
		vera.open("/buckets/shop-checkout/edit")
		vera.wantText("h1", "Not allowed")
		vera.shot(t, "viewer-refused")
	})

	t.Run("delete with confirmation", func(t *testing.T) {
		olga.t = t
		olga.open("/buckets/shop-checkout")
		olga.submit("a[href='/buckets/shop-checkout/delete']")
		olga.wantText("h1", "Delete shop-checkout?")
		olga.shot(t, "confirm-delete")
		olga.submit("form[action='/buckets/shop-checkout/delete'] button[type=submit]")
		olga.wantText(".flash", "Bucket shop-checkout deleted.")
		if _, err := e.bkts.Get(context.Background(), "shop-checkout"); err == nil {
			t.Fatal("bucket still exists")
		}
	})

	t.Run("audit log and users", func(t *testing.T) {
		ada := newTab(t, browser, e.srv.URL)
		ada.signIn("ada")
		ada.open("/audit?app=shop")
		ada.wantText("table", "bucket.delete", "bucket.update", "member.grant", "olga")
		ada.shot(t, "audit")
		ada.open("/users")
		ada.wantText("table", "olga", "vera", "ada")
		ada.shot(t, "users")
	})

	t.Run("narrow screen", func(t *testing.T) {
		olga.t = t
		olga.run("emulate a phone", chromedp.EmulateViewport(390, 844))
		olga.open("/apps/shop")
		olga.shot(t, "phone")
		olga.run("reset viewport", chromedp.ResetViewport())
	})
}

// TestBrowserUsage shows the usage chart of a busy bucket for each window
// and the overview of the buckets that denied the most, in Chromium, with
// screenshots to look at.
func TestBrowserUsage(t *testing.T) {
	e := newEnv(t)
	e.user("olga", false)
	e.app("shop", "olga")
	e.app("search", "olga")
	e.app("mobile", "olga")
	checkout := e.bucket("shop-checkout", "shop", "shop", "search", "mobile")
	e.applyBucket(checkout)
	e.bucket("shop-search", "shop", "shop", "search")
	e.bucket("shop-images", "shop")

	// A day of traffic: steady allowed calls, a burst of denials half an
	// hour ago, and a quieter app.
	now := time.Now()
	var shop, search, mobile [][2]int64
	for m := range 24 * 60 {
		a := int64(40 + (m*7)%25)
		var d int64
		if m >= 25 && m <= 35 {
			d = int64(30 + (m%4)*6)
		}
		shop = append(shop, [2]int64{a, d})
		search = append(search, [2]int64{int64(10 + (m*3)%12), int64(m % 9 / 7 * 4)})
		mobile = append(mobile, [2]int64{int64(5 + m%6), 0})
	}
	for _, s := range []struct {
		app    string
		counts [][2]int64
	}{{"shop", shop}, {"search", search}, {"mobile", mobile}} {
		rec, err := usage.NewRecorder(e.rdb, s.app, usage.WithKeyPrefix(e.ks.Prefix), usage.WithFlushInterval(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		for m, c := range s.counts {
			at := now.Add(-time.Duration(m) * time.Minute)
			rec.Add("shop-checkout", at, true, c[0])
			rec.Add("shop-checkout", at, false, c[1])
			if m < 60 {
				rec.Add("shop-search", at, true, c[0]/4)
				rec.Add("shop-search", at, false, int64(m%5/4))
			}
		}
		if err := rec.Close(); err != nil {
			t.Fatalf("write usage: %v", err)
		}
	}
	e.rollUp()

	browser := startBrowser(t)
	olga := newTab(t, browser, e.srv.URL)
	olga.signIn("olga")

	t.Run("bucket chart", func(t *testing.T) {
		olga.t = t
		olga.open("/buckets/shop-checkout")
		olga.wantText("#usage", "Usage", "Last hour", "shop", "search", "mobile", "tokens now")
		if olga.count("#usage svg.usage-chart rect.chart-allowed") < 60 {
			t.Fatal("the hour chart does not draw a bar per minute")
		}
		if olga.count("#usage svg.usage-chart rect.chart-denied") == 0 {
			t.Fatal("the hour chart draws no denials")
		}
		olga.shot(t, "usage-hour")
		// The switch is plain links; each lands on the chart (#usage).
		olga.submit("#usage a[href='/buckets/shop-checkout?window=day#usage']")
		olga.wantText("#usage .seg [aria-current]", "Last day")
		olga.wantText("#usage figure", "shop:", "search:", "mobile:", "allowed", "denied")
		olga.submit("#usage a[href='/buckets/shop-checkout?window=week#usage']")
		olga.wantText("#usage .seg [aria-current]", "Last week")
		// Screenshots from the top: a full-page shot of a scrolled page
		// draws the sticky top bar across it.
		for _, w := range []string{"day", "week"} {
			olga.open("/buckets/shop-checkout?window=" + w)
			olga.shot(t, "usage-"+w)
		}
	})

	t.Run("overview", func(t *testing.T) {
		olga.t = t
		olga.open("/usage")
		olga.wantText("h1", "Usage")
		olga.wantText("table.top-denied", "shop-checkout", "shop-search")
		if olga.count("table.top-denied tr[data-bucket='shop-images']") != 0 {
			t.Fatal("a bucket without denials is listed")
		}
		olga.shot(t, "usage-overview")
		olga.submit("a[href='/buckets/shop-checkout?window=hour#usage']")
		olga.wantText("h1", "shop-checkout")
	})
}
