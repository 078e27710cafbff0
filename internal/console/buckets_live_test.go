package console

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
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
	wantBody(t, "second page", r, `href="/buckets?before=c-full" rel="prev"`)
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

// listOrder returns the buckets of a list page, in order.
func listOrder(body string) string {
	var out []string
	for _, p := range strings.Split(body, `<tr data-bucket="`)[1:] {
		out = append(out, p[:strings.Index(p, `"`)])
	}
	return strings.Join(out, " ")
}

// rowOf returns the list row of bucket.
func rowOf(t *testing.T, body, bucket string) string {
	t.Helper()
	i := strings.Index(body, `<tr data-bucket="`+bucket+`">`)
	if i < 0 {
		t.Fatalf("no row of %s", bucket)
	}
	row := body[i:]
	return row[:strings.Index(row, "</tr>")]
}

// TestBucketListNearLimit checks the "near limit" badge, the filter on it
// (alone, ranked by near-limit acquires; and with the denied filter), and
// would-deny counts in the sparkline. A bucket with light traffic, a few of
// whose calls found it near its limit, is not marked (usage.NearLimit).
func TestBucketListNearLimit(t *testing.T) {
	e, ob, vb := bucketFixture(t)
	for _, n := range []string{"a-calm", "b-busy", "c-near", "d-shadow", "e-light"} {
		e.bucket(n, "alpha")
	}
	e.bucket("g-near", "gamma") // vera cannot see it
	at := time.Now().Add(-3 * time.Minute)
	e.record("alpha", "a-calm", at, 50, 0)
	e.record("alpha", "b-busy", at, 10, 30)
	e.recordMore("alpha", "b-busy", at, 34, 0)
	e.record("alpha", "c-near", at, 8, 0)
	e.recordMore("alpha", "c-near", at, 5, 0)
	e.record("alpha", "d-shadow", at, 9, 0)
	e.recordMore("alpha", "d-shadow", at, 4, 4)
	e.record("gamma", "g-near", at, 9, 0)
	e.recordMore("gamma", "g-near", at, 9, 0)
	e.record("alpha", "e-light", at, 600, 0)
	e.recordMore("alpha", "e-light", at, 4, 0)
	e.rollUp()

	r := ob.get("/buckets")
	wantStatus(t, "list", r, http.StatusOK)
	wantBody(t, "list", r, `name="near" value="1"`, "Near its limit in the last hour")
	for bucket, near := range map[string]bool{"a-calm": false, "b-busy": true, "c-near": true, "d-shadow": true, "e-light": false} {
		if got := strings.Contains(rowOf(t, r.body, bucket), `class="badge badge-near"`); got != near {
			t.Errorf("%s: near-limit badge %v, want %v", bucket, got, near)
		}
	}
	if !strings.Contains(rowOf(t, r.body, "d-shadow"), `class="sparkline-would"`) ||
		strings.Contains(rowOf(t, r.body, "b-busy"), `class="sparkline-would"`) {
		t.Error("would-deny counts are not drawn in the shadow bucket's sparkline alone")
	}

	r = ob.get("/buckets?near=1")
	if got := listOrder(r.body); got != "b-busy g-near c-near d-shadow" {
		t.Errorf("near limit, most near-limit acquires first: %s", got)
	}
	wantBody(t, "near filter", r, `id="list-order"`, "Most acquires near the limit in the last hour first.", "1–4 of 4 buckets",
		`<input type="checkbox" name="near" value="1" checked`)
	if got := listOrder(vb.get("/buckets?near=1").body); got != "b-busy c-near d-shadow" {
		t.Errorf("vera's near-limit list: %s", got)
	}
	if got := listOrder(ob.get("/buckets?near=1&denied=1").body); got != "b-busy" {
		t.Errorf("near limit and denied: %s", got)
	}
	if got := listOrder(ob.get("/buckets?near=1&q=calm").body); got != "" {
		t.Errorf("near filter keeps a calm bucket: %s", got)
	}
}

// TestBucketListMostDeniedPages pages the "most denied" list with its
// keyset cursors: every bucket once, in order, with counts, and previous
// pages that give back exactly the pages seen.
func TestBucketListMostDeniedPages(t *testing.T) {
	e, ob, _ := bucketFixture(t)
	at := time.Now().Add(-2 * time.Minute)
	var want []string
	for i := 30; i >= 1; i-- {
		n := fmt.Sprintf("b-%02d", i)
		e.bucket(n, "alpha")
		// Denials 15, 15, 14, 14, ... 1, 1: ties ranked by name, Z to A.
		e.record("alpha", n, at, 1, int64((i+1)/2))
		want = append(want, n)
	}
	e.bucket("no-denials", "alpha")
	e.record("alpha", "no-denials", at, 5, 0)
	e.rollUp()

	first := ob.get("/buckets?sort=denied")
	wantStatus(t, "most denied", first, http.StatusOK)
	wantBody(t, "first page", first, "1–25 of 30 buckets", "Most denials in the last hour first.")
	if strings.Contains(first.body, `rel="prev"`) {
		t.Error("the first page links to a previous one")
	}
	next := regexp.MustCompile(`href="([^"]+)" rel="next"`).FindStringSubmatch(first.body)
	if next == nil {
		t.Fatal("no next page")
	}
	second := ob.get(html.UnescapeString(next[1]))
	wantBody(t, "second page", second, "26–30 of 30 buckets")
	if got := listOrder(first.body) + " " + listOrder(second.body); got != strings.Join(want, " ") {
		t.Errorf("pages: %s\nwant   %s", got, strings.Join(want, " "))
	}
	if strings.Contains(second.body, `rel="next"`) {
		t.Error("the last page links to a next one")
	}
	prev := regexp.MustCompile(`href="([^"]+)" rel="prev"`).FindStringSubmatch(second.body)
	if prev == nil {
		t.Fatal("no previous page")
	}
	back := ob.get(html.UnescapeString(prev[1]))
	if listOrder(back.body) != listOrder(first.body) || !strings.Contains(back.body, "1–25 of 30 buckets") {
		t.Errorf("previous page: %s", listOrder(back.body))
	}
	// A damaged cursor shows the first page.
	if got := listOrder(ob.get("/buckets?sort=denied&after=x:y:z").body); got != listOrder(first.body) {
		t.Errorf("damaged cursor: %s", got)
	}
}
