package console

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/redisscript"
)

// TestBucketStateJSON checks the live state endpoints: the documented
// shape, whole-bucket visibility like the pages, and names the user may
// not see left out of the list.
func TestBucketStateJSON(t *testing.T) {
	e, ob, vb := bucketFixture(t)
	e.app("beta", "vera")
	a := e.bucket("alpha-api", "alpha")
	e.applyBucket(a)
	e.bucket("alpha-new", "alpha") // not in Redis yet
	e.bucket("gamma-api", "gamma") // vera cannot see it
	if _, err := redisscript.Acquire(context.Background(), e.rdb, e.ks, "alpha-api", "alpha", 3); err != nil {
		t.Fatal(err)
	}

	r := ob.get("/buckets/alpha-api/state.json")
	wantStatus(t, "one bucket", r, http.StatusOK)
	var one struct {
		Name     string  `json:"name"`
		Exists   bool    `json:"exists"`
		Tokens   float64 `json:"tokens"`
		Capacity int64   `json:"capacity"`
	}
	if err := json.Unmarshal([]byte(r.body), &one); err != nil {
		t.Fatalf("decode %q: %v", r.body, err)
	}
	// 100 a minute refill: 3 taken, at most 10 back however slow this runs.
	if one.Name != "alpha-api" || !one.Exists || one.Capacity != 10 || one.Tokens < 7 || one.Tokens > 10 {
		t.Fatalf("state %+v", one)
	}
	wantStatus(t, "vera, invisible bucket", vb.get("/buckets/gamma-api/state.json"), http.StatusNotFound)
	wantStatus(t, "missing bucket", ob.get("/buckets/nope/state.json"), http.StatusNotFound)

	var list struct {
		Buckets []struct {
			Name   string `json:"name"`
			Exists bool   `json:"exists"`
		} `json:"buckets"`
	}
	r = vb.get("/live/buckets.json?names=" + url.QueryEscape("alpha-api,alpha-new,gamma-api,nope,<bad>"))
	wantStatus(t, "list", r, http.StatusOK)
	if err := json.Unmarshal([]byte(r.body), &list); err != nil {
		t.Fatalf("decode %q: %v", r.body, err)
	}
	var got []string
	for _, b := range list.Buckets {
		got = append(got, b.Name+"="+map[bool]string{true: "in", false: "out"}[b.Exists])
	}
	if strings.Join(got, " ") != "alpha-api=in alpha-new=out" {
		t.Fatalf("vera's list state: %v", got)
	}
	r = vb.get("/live/buckets.json?names=" + strings.Repeat("a,", 101))
	wantStatus(t, "too many names", r, http.StatusUnprocessableEntity)
}

// TestBucketListShowsState checks the list's state per bucket, its sorts,
// its filter and its pages.
func TestBucketListShowsState(t *testing.T) {
	e, ob, _ := bucketFixture(t)
	for _, n := range []string{"a-calm", "b-busy", "c-full"} {
		e.applyBucket(e.bucket(n, "alpha"))
	}
	now := time.Now()
	e.record("alpha", "b-busy", now.Add(-3*time.Minute), 10, 30)
	e.record("alpha", "a-calm", now.Add(-3*time.Minute), 50, 0)
	e.rollUp()
	if _, err := redisscript.Acquire(context.Background(), e.rdb, e.ks, "a-calm", "alpha", 9); err != nil {
		t.Fatal(err)
	}

	r := ob.get("/buckets")
	wantStatus(t, "list", r, http.StatusOK)
	wantBody(t, "list", r, `data-live-src="/live/buckets.json?names=a-calm%2Cb-busy%2Cc-full"`,
		`<tr data-bucket="b-busy">`, `class="sparkline"`, `class="gauge"`, `75%`, "1–3 of 3 buckets")
	order := func(body string) string {
		var out []string
		for _, p := range strings.Split(body, `<tr data-bucket="`)[1:] {
			out = append(out, p[:strings.Index(p, `"`)])
		}
		return strings.Join(out, " ")
	}
	if got := order(r.body); got != "a-calm b-busy c-full" {
		t.Errorf("by name: %s", got)
	}
	if got := order(ob.get("/buckets?sort=denied").body); got != "b-busy" {
		t.Errorf("most denied: %s", got)
	}
	if got := order(ob.get("/buckets?denied=1&q=busy").body); got != "b-busy" {
		t.Errorf("denied filter with search: %s", got)
	}
	if got := order(ob.get("/buckets?denied=1&q=calm").body); got != "" {
		t.Errorf("denied filter keeps a bucket without denials: %s", got)
	}
	// a-calm has 1 token of 10 (100 a minute: at most a few more by now).
	if got := order(ob.get("/buckets?sort=fill").body); !strings.HasPrefix(got, "a-calm") {
		t.Errorf("nearest to limit: %s", got)
	}
	r = ob.get("/buckets?after=b-busy")
	wantBody(t, "second page", r, `href="/buckets?q=&amp;app=&amp;sort=&amp;before=c-full" rel="prev"`)
	if got := order(ob.get("/buckets?before=c-full").body); got != "a-calm b-busy" {
		t.Errorf("previous page: %s", got)
	}
}

// TestBucketFormPreview checks the form's server-side preview: it saves
// nothing, draws the simulation and says the limit in words; a bad
// pattern comes back with a message under its field.
func TestBucketFormPreview(t *testing.T) {
	e, ob, vb := bucketFixture(t)
	r := ob.get("/buckets/new")
	wantBody(t, "new form", r, `<option value="" selected>Choose an app…</option>`, `name="preview"`)

	form := url.Values{"name": {"prev"}, "owner_app": {"alpha"}, "max_permits": {"10"}, "rate": {"5 per second"},
		"steady": {"8"}, "burst": {"20"}, "every": {"10"}, "duration": {"30"}, "preview": {"1"}}
	r = ob.post("/buckets", form)
	wantStatus(t, "preview", r, http.StatusOK)
	wantBody(t, "preview", r, `class="chart preview-chart"`, "bursts of up to 10, then 5 per second",
		`value="prev"`, `value="8"`, "denied (")
	if _, err := e.bkts.Get(context.Background(), "prev"); err == nil {
		t.Fatal("a preview saved the bucket")
	}

	form.Set("every", "0.5")
	r = ob.post("/buckets", form)
	wantStatus(t, "bad pattern", r, http.StatusUnprocessableEntity)
	wantBody(t, "bad pattern", r, `id="every-error"`)

	// Editing: the preview needs the right to edit, like saving.
	e.bucket("alpha-api", "alpha")
	form.Set("every", "10")
	wantStatus(t, "edit preview", ob.post("/buckets/alpha-api", form), http.StatusOK)
	wantStatus(t, "viewer preview", vb.post("/buckets/alpha-api", form), http.StatusForbidden)
}

// TestNotFoundKeepsNavigation: an unknown address answered to a signed-in
// user keeps the navigation and offers no sign-in.
func TestNotFoundKeepsNavigation(t *testing.T) {
	_, ob, _ := bucketFixture(t)
	r := ob.get("/no/such/page")
	wantStatus(t, "unknown page", r, http.StatusNotFound)
	wantBody(t, "unknown page", r, `href="/buckets"`, `href="/tokens"`, "Go to buckets")
	if strings.Contains(r.body, `href="/login"`) {
		t.Fatal("a signed-in user's 404 offers to sign in")
	}
}
