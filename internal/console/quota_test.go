package console

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/redisscript/quota"
)

// TestQuotaForm creates a quota on the form: a wrong period and zone come
// back inline, a rate typed before choosing the kind is ignored, and the
// saved quota's sentence and period show on the form and the page.
func TestQuotaForm(t *testing.T) {
	e, ob, _ := bucketFixture(t)
	r := ob.get("/buckets/new")
	wantBody(t, "new form", r, `<select id="quota_period" name="quota_period"`, `<option value="month">`, `name="time_zone"`,
		`data-quota-fields hidden`, `<output id="quota-summary"`)

	form := url.Values{"name": {"monthly"}, "owner_app": {"alpha"}, "kind": {"quota"}, "max_permits": {"10,000"},
		"rate": {"100/min"}, "quota_period": {"year"}, "time_zone": {"Mars/Olympus"}}
	r = ob.post("/buckets", form)
	wantStatus(t, "bad calendar", r, http.StatusUnprocessableEntity)
	for _, field := range []string{"quota_period", "time_zone"} {
		wantBody(t, "bad calendar", r, `id="`+field+`-error"`, `aria-describedby="`+field+`-hint `+field+`-error"`)
	}
	wantBody(t, "bad calendar", r, `unknown time zone &#34;Mars/Olympus&#34;`, `value="Mars/Olympus"`)
	if strings.Contains(r.body, `id="rate-error"`) {
		t.Fatal("the rate of a quota was refused, not ignored")
	}

	form.Set("quota_period", "month")
	form.Set("time_zone", "Europe/Berlin")
	r = ob.post("/buckets", form)
	wantStatus(t, "valid quota", r, http.StatusSeeOther)
	b, err := e.bkts.Get(context.Background(), "monthly")
	if err != nil {
		t.Fatal(err)
	}
	if b.Kind != buckets.KindQuota || b.QuotaPeriod != quota.Month || b.TimeZone != "Europe/Berlin" || !b.Rate.IsZero() || b.MaxPermits != 10_000 {
		t.Fatalf("saved %+v", b)
	}
	const sentence = "10,000 per month, resets on the 1st at 00:00 Europe/Berlin"
	wantBody(t, "page", ob.get("/buckets/monthly"), sentence, "not in Redis yet")

	r = ob.get("/buckets/monthly/edit")
	wantBody(t, "edit form", r, `<input type="hidden" name="kind" value="quota">`, `<option value="month" selected>`,
		`value="Europe/Berlin"`, sentence+".", `data-rate-fields hidden`)
	edit := url.Values{"version": {"1"}, "owner_app": {"alpha"}, "kind": {"quota"}, "max_permits": {"500"},
		"quota_period": {"day"}, "time_zone": {""}}
	r = ob.post("/buckets/monthly", edit)
	wantStatus(t, "edit", r, http.StatusSeeOther)
	if b, err = e.bkts.Get(context.Background(), "monthly"); err != nil || b.QuotaPeriod != quota.Day || b.TimeZone != "UTC" {
		t.Fatalf("edited %+v %v; want a daily quota in UTC", b, err)
	}
}

// TestQuotaPageShowsUsedAndReset: once in Redis, a quota's page shows
// what it used this period and when the period ends.
func TestQuotaPageShowsUsedAndReset(t *testing.T) {
	e, ob, _ := bucketFixture(t)
	b := &buckets.Bucket{Name: "daily", OwnerApp: "alpha", Kind: buckets.KindQuota, MaxPermits: 50, QuotaPeriod: quota.Day, TimeZone: "UTC"}
	if err := e.bkts.Create(context.Background(), e.system, b); err != nil {
		t.Fatal(err)
	}
	e.applyBucket(b)
	if a, err := redisscript.Acquire(context.Background(), e.rdb, e.ks, "daily", "alpha", 7); err != nil || a.Code != redisscript.Allowed {
		t.Fatalf("acquire: %+v %v", a, err)
	}
	st0, err := redisscript.Read(context.Background(), e.rdb, e.ks, "daily")
	if err != nil || st0.PeriodEnd.IsZero() {
		t.Fatalf("read: %+v %v", st0, err)
	}
	reset := st0.PeriodEnd.UTC().Format("2006-01-02T15:04:05Z")
	r := ob.get("/buckets/daily")
	wantBody(t, "quota page", r, `id="quota-used" data-live-used>7</div>`, "used this period, of 50", `<dd id="quota-reset" data-live-reset data-none="unknown: Redis&#39;s clock is outside the quota&#39;s table of periods (is the sync worker running?)"><time datetime="`+reset+`"`,
		"50 per day, resets every day at 00:00 UTC")
	if strings.Contains(r.body, "data-live-tokens") {
		t.Fatal("a quota's page shows tokens")
	}
	// Neither a reserve nor a lease time: a quota has no tokens to keep or hand out.
	if strings.Contains(r.body, `id="reserve"`) || strings.Contains(r.body, "<dt>Lease time</dt>") {
		t.Fatal("a quota's definition shows a token bucket's reserve or lease time")
	}
	// The live state carries them, for the page to follow.
	var st struct {
		Exists bool   `json:"exists"`
		Used   *int64 `json:"used"`
		Reset  string `json:"reset"`
	}
	r = ob.get("/buckets/daily/state.json")
	wantStatus(t, "state", r, http.StatusOK)
	if err := json.Unmarshal([]byte(r.body), &st); err != nil {
		t.Fatalf("decode %q: %v", r.body, err)
	}
	if !st.Exists || st.Used == nil || *st.Used != 7 || st.Reset != st0.PeriodEnd.UTC().Format(time.RFC3339Nano) {
		t.Fatalf("quota state %s", r.body)
	}
	// A token bucket's state has neither.
	e.applyBucket(e.bucket("plain", "alpha"))
	if r = ob.get("/buckets/plain/state.json"); strings.Contains(r.body, `"used"`) || strings.Contains(r.body, `"reset"`) {
		t.Fatalf("token bucket state %s", r.body)
	}
}
