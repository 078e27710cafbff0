package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/redisscript/quota"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/web"
)

// The console's policy: the script must work without inline code.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// page is a test page with the parts of the console pages app.js works on.
const page = `<!doctype html><html><head><meta charset="utf-8">
<script src="/static/app.js" defer></script></head><body>
<p><time id="t1" datetime="2026-03-04T10:00:00Z">2026-03-04 10:00:00 UTC</time></p>
<form><input type="text" id="max_permits" value="10"><input type="text" id="rate" value="5/s">
<output id="sum" data-summary data-empty="Enter a capacity and a rate."></output></form>
<section id="one" data-live-src="/state/one" data-live-interval="50">
 <span data-live-tokens>?</span> of <span data-live-capacity>?</span>
 <svg class="gauge" viewBox="0 0 100 10" role="meter" aria-valuenow="0"><title>t</title>
  <rect class="gauge-fill" width="0" height="10" fill="#0072B2" data-low-fill="#D55E00" data-fill="#0072B2"/></svg>
</section>
<table id="list" data-live-src="/state/list" data-live-interval="50"><tbody>
 <tr data-bucket="a"><td data-live-tokens>?</td></tr>
 <tr data-bucket="b"><td data-live-tokens>?</td><td><svg class="gauge"><title>t</title><rect class="gauge-fill" width="0" data-low-fill="#D55E00" data-fill="#0072B2"/></svg></td></tr>
</tbody></table>
</body></html>`

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

func TestScript(t *testing.T) {
	var polls atomic.Int64
	mux := http.NewServeMux()
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(web.Static)))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Security-Policy", csp)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, page)
	})
	mux.HandleFunc("GET /state/one", func(w http.ResponseWriter, _ *http.Request) {
		// The first answers show a bucket almost empty, the later ones 7.884 of 10.
		n := polls.Add(1)
		tokens := 0.6
		if n > 2 {
			tokens = 7.884
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"name": "one", "exists": true, "tokens": tokens, "capacity": 10})
	})
	mux.HandleFunc("GET /state/list", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"buckets":[{"name":"a","exists":true,"tokens":1234.99,"capacity":5000},{"name":"b","exists":true,"tokens":0.2,"capacity":3}]}`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium(t)), chromedp.Headless,
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(400, 800))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	do := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		tctx, tcancel := context.WithTimeout(ctx, 60*time.Second)
		defer tcancel()
		if err := chromedp.Do(tctx, steps...); err != nil {
			t.Fatal(err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("read %s: %v", sel, err)
		}
		return s
	}
	attr := func(sel, name string) string {
		t.Helper()
		r, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS(sel), name))
		if err != nil {
			t.Fatalf("read %s %s: %v", sel, name, err)
		}
		return r.Value
	}
	poll := func(expr string) {
		t.Helper()
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
			t.Fatalf("wait for %s: %v", expr, err)
		}
	}
	do(chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Asia/Kolkata"})
		return err
	}), chromedp.Navigate(srv.URL+"/"))
	poll(`window.Sluice !== undefined`)

	// The summary the form shows as you type is the server's Summary.
	inputs := []struct {
		capacity, rate string
	}{
		{"10", "5/s"}, {"1", "0.5/s"}, {"1000000", "100/min"}, {"7", "7 per 90s"}, {"5", "3 per 2 hours"},
		{"10000", "10000/day"}, {"2", "1 per 30 days"}, {"3", "0.000001/s"}, {"1000000000", "1000000000/s"},
		{"3", "1/7s"}, {"1", "999999999.999999/365d"}, {"4", " 100  PER   Minute "}, {"4", "5./s"}, {"4", ".5/s"},
		{"4", "007/008s"}, {"4", "1/0s"}, {"4", "1/366d"}, {"4", "0/s"}, {"4", "1.0000001/s"}, {"4", "1000000001/s"},
		{"4", "1/fortnight"}, {"4", "1 per"}, {"4", "/s"}, {"4", "."}, {"0", "1/s"}, {"1000000001", "1/s"},
		{"abc", "1/s"}, {"4", "2/2d"}, {"4", "1/86400s"}, {"4", "3/604800s"}, {"4", "1/1000000000s"},
	}
	for _, in := range inputs {
		want := ""
		if r, err := buckets.ParseRate(in.rate); err == nil {
			if c, err := strconv.ParseInt(in.capacity, 10, 64); err == nil {
				want = buckets.Summary(c, r)
			}
		}
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`window.Sluice.summary(%q, %q)`, in.capacity, in.rate)))
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("summary(%q, %q): script %q, server %q", in.capacity, in.rate, got, want)
		}
	}

	// A quota's sentence is the server's QuotaSummary (the zone is the
	// server's to check: these are known ones).
	for _, in := range []struct{ capacity, period, zone string }{
		{"10000", "month", "Europe/Berlin"}, {"1,000", "hour", "UTC"}, {"1", "week", "Asia/Kolkata"}, {"5", "day", " "},
		{"0", "day", "UTC"}, {"1000000001", "day", "UTC"}, {"5", "year", "UTC"}, {"5", "", "UTC"}, {"x", "day", "UTC"},
	} {
		want := ""
		if n, err := buckets.ParseMaxPermits(in.capacity); err == nil {
			want = buckets.QuotaSummary(n, quota.Period(in.period), in.zone)
		}
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`window.Sluice.quotaSummary(%q, %q, %q)`, in.capacity, in.period, in.zone)))
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("quotaSummary(%q, %q, %q): script %q, server %q", in.capacity, in.period, in.zone, got, want)
		}
	}

	// Typing updates it.
	if got := text("#sum"); got != "Bursts of up to 10, then 5 per second: 300 per minute sustained." {
		t.Errorf("summary on load = %q", got)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("rate").value = ""`)); err != nil {
		t.Fatal(err)
	}
	do(chromedp.SendKeys(chromedp.ID("rate"), "100/min"))
	if got := text("#sum"); got != "Bursts of up to 10, then 100 per minute: 6,000 per hour sustained." {
		t.Errorf("summary after typing = %q", got)
	}
	do(chromedp.SendKeys(chromedp.ID("rate"), "x"))
	if got := text("#sum"); got != "Enter a capacity and a rate." {
		t.Errorf("summary of an invalid rate = %q", got)
	}

	// Times in the viewer's zone, UTC on hover.
	if got, title := text("#t1"), attr("#t1", "title"); !strings.HasPrefix(got, "2026-03-04 15:30:00") || title != "2026-03-04 10:00:00 UTC" {
		t.Errorf("time shows %q, title %q; want 15:30 local, 10:00 UTC on hover", got, title)
	}

	// Live state: whole tokens and the gauge follow the JSON.
	poll(`document.querySelector("#one [data-live-tokens]").textContent === "7"`)
	width, now, fill, capText := attr("#one .gauge-fill", "width"), attr("#one svg.gauge", "aria-valuenow"),
		attr("#one .gauge-fill", "fill"), text("#one [data-live-capacity]")
	if width != "78.84" || now != "7" || fill != "#0072B2" || capText != "10" {
		t.Errorf("gauge width %q, value %q, fill %q, capacity %q; want 78.84, 7, #0072B2, 10", width, now, fill, capText)
	}
	poll(`document.querySelector("#list tr[data-bucket=b] [data-live-tokens]").textContent === "0"`)
	if a, fill := text(`#list tr[data-bucket="a"] [data-live-tokens]`), attr(`#list tr[data-bucket="b"] .gauge-fill`, "fill"); a != "1,234" || fill != "#D55E00" {
		t.Errorf("list: a shows %q, b's gauge %q; want 1,234 and the denied colour", a, fill)
	}
	if n := polls.Load(); n < 3 {
		t.Errorf("%d polls of the single bucket, want at least 3", n)
	}
}
