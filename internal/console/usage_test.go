package console

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/client/usage"
	"github.com/sluicehq/sluice/internal/accounts"
	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/rbac"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/syncer"
	"github.com/sluicehq/sluice/internal/testenv"
	iusage "github.com/sluicehq/sluice/internal/usage"
)

// record writes counts of app on bucket at each time into e's Redis, the
// way a client's usage recorder does.
func (e *env) record(app, bucket string, at time.Time, allowed, denied int64) {
	e.t.Helper()
	rec, err := usage.NewRecorder(e.rdb, app, usage.WithKeyPrefix(e.ks.Prefix), usage.WithFlushInterval(time.Hour))
	if err != nil {
		e.t.Fatalf("new recorder: %v", err)
	}
	defer rec.Close()
	rec.Add(bucket, at, true, allowed)
	rec.Add(bucket, at, false, denied)
	if err := rec.Flush(context.Background()); err != nil {
		e.t.Fatalf("flush usage: %v", err)
	}
}

// recordMore writes near-limit and would-deny counts of app on bucket at
// at, as a Recorder observing such decisions does (they are parts of the
// allowed and denied counts, which record writes).
func (e *env) recordMore(app, bucket string, at time.Time, near, would int64) {
	e.t.Helper()
	rec, err := usage.NewRecorder(e.rdb, app, usage.WithKeyPrefix(e.ks.Prefix), usage.WithFlushInterval(time.Hour))
	if err != nil {
		e.t.Fatalf("new recorder: %v", err)
	}
	defer rec.Close()
	rec.AddNearLimit(bucket, at, near)
	rec.AddWouldDeny(bucket, at, would)
	if err := rec.Flush(context.Background()); err != nil {
		e.t.Fatalf("flush usage: %v", err)
	}
}

// recordFallback writes calls of app on bucket at at that a client's
// failure policy granted and refused, as a Recorder observing them does
// (for a bucket it has counted a decision of Redis for).
func (e *env) recordFallback(app, bucket string, at time.Time, granted, refused int64) {
	e.t.Helper()
	rec, err := usage.NewRecorder(e.rdb, app, usage.WithKeyPrefix(e.ks.Prefix), usage.WithFlushInterval(time.Hour))
	if err != nil {
		e.t.Fatalf("new recorder: %v", err)
	}
	defer rec.Close()
	rec.Add(bucket, at, true, 1) // known: Redis answered it once
	rec.AddFallback(bucket, at, true, granted)
	rec.AddFallback(bucket, at, false, refused)
	if err := rec.Flush(context.Background()); err != nil {
		e.t.Fatalf("flush usage: %v", err)
	}
}

// rollUp rolls the usage counts in e's Redis up into MySQL, as the sync
// worker does, up to the last whole minute.
func (e *env) rollUp() {
	e.t.Helper()
	r := iusage.NewRoller(iusage.RollerConfig{DB: e.db, Redis: e.rdb, Keyspace: e.ks, Grace: time.Nanosecond})
	if _, err := r.RollUp(context.Background()); err != nil {
		e.t.Fatalf("roll up usage: %v", err)
	}
}

// applyBucket writes b's config into Redis, as the sync worker does.
func (e *env) applyBucket(b *buckets.Bucket) {
	e.t.Helper()
	if _, err := redisscript.Apply(context.Background(), e.rdb, e.ks, syncer.ConfigOf(b), false); err != nil {
		e.t.Fatalf("apply %s: %v", b.Name, err)
	}
}

// usageRow returns the cells of the per-app usage table's row of app.
func usageRow(t *testing.T, body, app string) []string {
	t.Helper()
	m := regexp.MustCompile(`(?s)<tr data-app="` + regexp.QuoteMeta(app) + `">(.*?)</tr>`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no usage row for app %s\n%s", app, excerpt(body))
	}
	var cells []string
	for _, c := range regexp.MustCompile(`<td[^>]*>(.*?)</td>`).FindAllStringSubmatch(m[1], -1) {
		cells = append(cells, c[1])
	}
	return cells
}

func wantRow(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("%s: row %q, want %q", what, got, want)
	}
}

// TestBucketUsageChart writes counts into Redis as clients would and
// checks that each window of the bucket page shows them: the per-app
// totals, the chart's series (its legend and one bar per point with
// counts) and the current token level.
func TestBucketUsageChart(t *testing.T) {
	e := newEnv(t)
	olga := e.user("olga", false)
	e.app("alpha", "olga")
	e.app("shop", "olga")
	b := e.bucket("alpha-api", "alpha", "alpha", "shop")
	e.applyBucket(b)

	now := time.Now()
	e.record("alpha", "alpha-api", now.Add(-10*time.Minute), 30, 5)
	e.record("shop", "alpha-api", now.Add(-3*time.Minute), 7, 12)
	e.record("alpha", "alpha-api", now.Add(-3*time.Hour), 100, 0)   // in the day, not the hour
	e.record("alpha", "alpha-api", now.Add(-72*time.Hour), 1000, 1) // in the week only
	e.record("alpha", "other-bucket", now, 999, 999)                // another bucket's counts

	br := e.browser()
	br.signIn(olga)

	r := br.get("/buckets/alpha-api")
	wantStatus(t, "hour", r, http.StatusOK)
	wantRow(t, "alpha, last hour", usageRow(t, r.body, "alpha"), "alpha", "30", "5", "14.3%")
	wantRow(t, "shop, last hour", usageRow(t, r.body, "shop"), "shop", "7", "12", "63.2%")
	wantBody(t, "hour", r,
		`<svg xmlns="http://www.w3.org/2000/svg" class="chart usage-chart"`,
		"alpha: 30 allowed, 5 denied", "shop: 7 allowed, 12 denied", // the legend
		`<dd>37</dd>`, `<dd class="denied">17</dd>`, `<dd>31.5%</dd>`, // the totals
		`<dt>tokens now, of <span data-live-capacity>10</span></dt><dd data-live-tokens>10</dd>`, // a new bucket is full
		`href="/buckets/alpha-api?window=day#usage"`, `aria-current="page">Last hour</a>`)
	// Each app draws one allowed bar for its minute, and one denied bar,
	// in the wide and in the narrow drawing; the limit is drawn in both.
	if n := strings.Count(r.body, `class="chart-allowed"`); n != 4 {
		t.Errorf("hour chart has %d allowed bars, want 2 per drawing (one per app with counts)", n)
	}
	if n := strings.Count(r.body, `class="chart-denied"`); n != 4 {
		t.Errorf("hour chart has %d denied bars, want 2 per drawing", n)
	}
	wantBody(t, "hour", r, `<div class="chart-wide">`, `<div class="chart-narrow">`, "limit: ")
	if strings.Contains(r.body, "999") {
		t.Error("another bucket's counts are shown")
	}

	r = br.get("/buckets/alpha-api?window=day")
	wantStatus(t, "day", r, http.StatusOK)
	wantRow(t, "alpha, last day", usageRow(t, r.body, "alpha"), "alpha", "130", "5", "3.7%")
	wantRow(t, "shop, last day", usageRow(t, r.body, "shop"), "shop", "7", "12", "63.2%")
	wantBody(t, "day", r, "alpha: 130 allowed, 5 denied", `aria-current="page">Last day</a>`)

	r = br.get("/buckets/alpha-api?window=week")
	wantStatus(t, "week", r, http.StatusOK)
	wantRow(t, "alpha, last week", usageRow(t, r.body, "alpha"), "alpha", "1,130", "6", "0.5%")
	wantBody(t, "week", r, "alpha: 1,130 allowed, 6 denied", `aria-current="page">Last week</a>`)

	// A window that is not offered shows the last hour rather than an error.
	r = br.get("/buckets/alpha-api?window=%3Cscript%3E")
	wantStatus(t, "odd window", r, http.StatusOK)
	wantRow(t, "alpha, odd window", usageRow(t, r.body, "alpha"), "alpha", "30", "5", "14.3%")
	if strings.Contains(r.body, "<script>") {
		t.Fatal("the window parameter is echoed unescaped")
	}
}

func TestBucketUsageWithoutCounts(t *testing.T) {
	e := newEnv(t)
	olga := e.user("olga", false)
	e.app("alpha", "olga")
	e.bucket("quiet", "alpha")
	br := e.browser()
	br.signIn(olga)
	r := br.get("/buckets/quiet?window=week")
	wantStatus(t, "quiet bucket", r, http.StatusOK)
	wantBody(t, "quiet bucket", r, "No acquires counted in this window", `<dd>0</dd>`)
	if strings.Contains(r.body, `<tr data-app=`) {
		t.Fatal("a bucket without counts lists apps")
	}
}

// TestUsageOverview checks that the overview ranks buckets by denials in
// the last hour and lists only buckets the user may see.
func TestUsageOverview(t *testing.T) {
	e := newEnv(t)
	olga := e.user("olga", false)
	stan := e.user("stan", false)
	vera := e.user("vera", false)
	ada := e.user("ada", true)
	nobody := e.user("nobody", false)
	e.app("alpha", "olga")
	e.app("beta", "stan")
	e.grant("vera", "alpha", rbac.RoleViewer)
	e.bucket("alpha-api", "alpha")
	e.bucket("alpha-web", "alpha")
	e.bucket("alpha-calm", "alpha")
	e.bucket("beta-api", "beta")
	e.bucket("beta-shared", "beta", "beta", "alpha") // alpha may take tokens: alpha's members see it

	now := time.Now()
	e.record("alpha", "alpha-api", now.Add(-5*time.Minute), 40, 10)
	e.record("alpha", "alpha-web", now.Add(-20*time.Minute), 5, 30)
	e.record("alpha", "alpha-calm", now.Add(-1*time.Minute), 500, 0)
	e.record("beta", "beta-api", now.Add(-2*time.Minute), 1, 99)
	e.record("alpha", "beta-shared", now.Add(-30*time.Minute), 3, 20)
	e.record("alpha", "alpha-api", now.Add(-2*time.Hour), 0, 1000) // before the last hour
	e.rollUp()

	order := func(body string) []string {
		var out []string
		for _, m := range regexp.MustCompile(`<tr data-bucket="([^"]+)">`).FindAllStringSubmatch(body, -1) {
			out = append(out, m[1])
		}
		return strings.Fields(strings.Join(out, " "))
	}
	for _, tc := range []struct {
		who  string
		user *accounts.User
		want string
	}{
		{"olga", olga, "alpha-web beta-shared alpha-api"},
		{"vera", vera, "alpha-web beta-shared alpha-api"},
		{"stan", stan, "beta-api beta-shared"},
		{"ada", ada, "beta-api alpha-web beta-shared alpha-api"},
		{"nobody", nobody, ""},
	} {
		br := e.browser()
		br.signIn(tc.user)
		r := br.get("/usage")
		wantStatus(t, tc.who, r, http.StatusOK)
		if got := strings.Join(order(r.body), " "); got != tc.want {
			t.Errorf("%s sees %q, want %q", tc.who, got, tc.want)
		}
		if tc.who == "olga" {
			wantBody(t, "olga's overview", r, `<td class="num denied">30</td>`, `<td class="num">85.7%</td>`,
				`href="/buckets/alpha-web?window=hour#usage"`, `aria-current="page">Usage</a>`)
		}
		if tc.who == "nobody" {
			wantBody(t, "nobody's overview", r, "You cannot see any bucket yet.")
		}
	}
}

// TestUsageWhenRedisIsDown: the bucket page and the overview still answer,
// and say that usage cannot be read.
func TestUsageWhenRedisIsDown(t *testing.T) {
	dead := redis.NewClient(&redis.Options{Addr: testenv.ClosedAddr,
		DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { _ = dead.Close() })
	e := newEnvOn(t, testenv.MySQL(t), func(s *setup) { s.manage.Redis = dead })
	olga := e.user("olga", false)
	e.app("alpha", "olga")
	e.bucket("alpha-api", "alpha")
	br := e.browser()
	br.signIn(olga)
	r := br.get("/buckets/alpha-api?window=day")
	wantStatus(t, "bucket page", r, http.StatusOK)
	wantBody(t, "bucket page", r, "Redis did not answer; usage cannot be shown right now.")
	// The overview reads the roll-up in MySQL only.
	r = br.get("/usage")
	wantStatus(t, "overview", r, http.StatusOK)
	wantBody(t, "overview", r, "None of your 1 bucket denied an acquire in the last hour.")
}

// TestBucketUsageWouldDeny: a bucket in shadow mode shows its would-deny
// counts apart, in the totals, the per-app table and both drawings of the
// chart (bars and legend); a bucket without them does not mention them.
func TestBucketUsageWouldDeny(t *testing.T) {
	e := newEnv(t)
	olga := e.user("olga", false)
	e.app("alpha", "olga")
	b := e.bucket("trial", "alpha")
	b.Shadow = true
	if err := e.bkts.Update(context.Background(), e.system, b); err != nil {
		t.Fatal(err)
	}
	e.bucket("plain", "alpha")
	at := time.Now().Add(-2 * time.Minute)
	e.record("alpha", "trial", at, 40, 0)
	e.recordMore("alpha", "trial", at, 25, 25)
	e.record("alpha", "plain", at, 40, 0)

	br := e.browser()
	br.signIn(olga)
	r := br.get("/buckets/trial")
	wantStatus(t, "shadow bucket", r, http.StatusOK)
	wantBody(t, "shadow bucket", r, `<dt>would deny (shadow mode)</dt><dd class="would-deny" data-would-deny>25</dd>`,
		">would deny (shadow mode): 25<", "alpha: 40 allowed (25 would deny), 0 denied", "in orange")
	wantRow(t, "alpha", usageRow(t, r.body, "alpha"), "alpha", "40", "25", "0", "0%")
	if n := strings.Count(r.body, `class="chart-would"`); n != 2 {
		t.Errorf("%d would-deny bars, want one per drawing", n)
	}
	if n := strings.Count(r.body, `>would deny (shadow mode): 25<`); n != 2 {
		t.Errorf("%d would-deny legend entries, want one per drawing", n)
	}
	r = br.get("/buckets/plain")
	if strings.Contains(r.body, "would deny") || strings.Contains(r.body, "chart-would") {
		t.Error("a bucket without shadow mode or would-deny counts mentions them")
	}
}

// TestBucketUsageFallback: calls the clients' failure policy answered show
// apart from the bucket's decisions, on a bucket in shadow mode too (which
// never denies): in the totals, the per-app table and both drawings of the
// chart; a bucket without them does not mention them.
func TestBucketUsageFallback(t *testing.T) {
	e := newEnv(t)
	olga := e.user("olga", false)
	e.app("alpha", "olga")
	b := e.bucket("trial", "alpha")
	b.Shadow = true
	if err := e.bkts.Update(context.Background(), e.system, b); err != nil {
		t.Fatal(err)
	}
	e.bucket("plain", "alpha")
	at := time.Now().Add(-2 * time.Minute)
	e.recordFallback("alpha", "trial", at, 3, 17)
	e.record("alpha", "plain", at, 40, 0)

	br := e.browser()
	br.signIn(olga)
	r := br.get("/buckets/trial")
	wantStatus(t, "shadow bucket", r, http.StatusOK)
	wantBody(t, "shadow bucket", r,
		`<div><dt>denied</dt><dd class="">0</dd></div>`,
		`<dt>answered by the failure policy (Redis did not answer)</dt><dd><span data-fallback-granted>3</span> granted, <span class="denied" data-fallback-refused>17</span> refused</dd>`,
		">granted by the failure policy: 3<", ">refused by the failure policy: 17<",
		"alpha: 1 allowed, 0 denied; failure policy: 3 granted, 17 refused",
		"shadow mode never refuses; the failure policy may")
	wantRow(t, "alpha", usageRow(t, r.body, "alpha"), "alpha", "1", "0", "0", "0%", "3 granted, 17 refused")
	if n := strings.Count(r.body, `class="chart-fallback-refused"`); n != 2 {
		t.Errorf("%d bars of the failure policy's refusals, want one per drawing", n)
	}
	r = br.get("/buckets/plain")
	if strings.Contains(r.body, "failure policy") || strings.Contains(r.body, "chart-fallback") {
		t.Error("a bucket without the failure policy's answers mentions them")
	}
}

// TestUsageOverviewShowsShadowBuckets: a bucket in shadow mode never
// denies, so the overview ranks it by what it would have denied, for an
// admin and for a member.
func TestUsageOverviewShowsShadowBuckets(t *testing.T) {
	e := newEnv(t)
	olga := e.user("olga", false)
	ada := e.user("ada", true)
	e.app("alpha", "olga")
	e.bucket("alpha-api", "alpha")
	rate, _ := buckets.ParseRate("100/min")
	trial := &buckets.Bucket{Name: "alpha-trial", OwnerApp: "alpha", MaxPermits: 10, Rate: rate, Shadow: true}
	if err := e.bkts.Create(context.Background(), e.system, trial); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	e.record("alpha", "alpha-api", now.Add(-3*time.Minute), 10, 4)
	rec, err := usage.NewRecorder(e.rdb, "alpha", usage.WithKeyPrefix(e.ks.Prefix), usage.WithFlushInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	rec.Add("alpha-trial", now.Add(-2*time.Minute), true, 50)
	rec.AddWouldDeny("alpha-trial", now.Add(-2*time.Minute), 30)
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	e.rollUp()
	for _, u := range []*accounts.User{olga, ada} {
		br := e.browser()
		br.signIn(u)
		r := br.get("/usage")
		wantStatus(t, u.Username, r, http.StatusOK)
		wantBody(t, u.Username, r, `<tr data-bucket="alpha-trial">`, `data-would-deny>30 would deny</div>`, `<tr data-bucket="alpha-api">`)
		if strings.Index(r.body, `data-bucket="alpha-trial"`) > strings.Index(r.body, `data-bucket="alpha-api"`) {
			t.Errorf("%s: the shadow bucket (30 would deny) ranks below the one that denied 4", u.Username)
		}
	}
}
