package console

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/redisscript/quota"
)

// keyedSlots creates a keyed concurrency limit of owner (20 slots held at
// most 30 s) and writes it to Redis.
func (e *env) keyedSlots(name, owner string) *buckets.Bucket {
	e.t.Helper()
	b := &buckets.Bucket{Name: name, OwnerApp: owner, Kind: buckets.KindConcurrency, MaxPermits: 20, SlotMillis: 30_000,
		Keyed: true}
	if err := e.bkts.Create(context.Background(), e.system, b); err != nil {
		e.t.Fatalf("create %s: %v", name, err)
	}
	cfg := redisscript.Config{Name: b.Name, ID: b.ID, Version: b.Version, Capacity: b.MaxPermits, Apps: []string{owner},
		Kind: redisscript.KindConcurrency, SlotMillis: b.SlotMillis}
	if _, err := redisscript.ApplyKeyed(context.Background(), e.rdb, e.ks, cfg, false); err != nil {
		e.t.Fatal(err)
	}
	return b
}

// keyedQuota creates a keyed monthly quota of 10,000 in Europe/Berlin of
// owner and writes it to Redis with its table of periods.
func (e *env) keyedQuota(name, owner string) *buckets.Bucket {
	e.t.Helper()
	b := &buckets.Bucket{Name: name, OwnerApp: owner, Kind: buckets.KindQuota, MaxPermits: 10_000, QuotaPeriod: quota.Month,
		TimeZone: "Europe/Berlin", Keyed: true}
	if err := e.bkts.Create(context.Background(), e.system, b); err != nil {
		e.t.Fatalf("create %s: %v", name, err)
	}
	loc, err := quota.LoadZone(b.TimeZone)
	if err != nil {
		e.t.Fatal(err)
	}
	cfg := redisscript.Config{Name: b.Name, ID: b.ID, Version: b.Version, Capacity: b.MaxPermits, Apps: []string{owner},
		Kind: redisscript.KindQuota, Bounds: quota.Table(quota.Month, loc, time.Now())}
	if _, err := redisscript.ApplyKeyed(context.Background(), e.rdb, e.ks, cfg, false); err != nil {
		e.t.Fatal(err)
	}
	return b
}

// TestKeyedConcurrencyLimitsKeys: a keyed concurrency limit's per-key part
// speaks of slots: its default limit, a key's slots in use and first
// expiry read from Redis, its top keys, and overrides that are a slot
// count without a rate (one with a rate comes back inline).
func TestKeyedConcurrencyLimitsKeys(t *testing.T) {
	e, ob, vb := bucketFixture(t)
	b := e.keyedSlots("exports", "alpha")
	ctx := context.Background()

	r := vb.get("/buckets/exports")
	wantStatus(t, "page", r, http.StatusOK)
	wantBody(t, "page", r, "Every caller key gets its own 20 slots, each held at most 30s unless renewed.",
		"Taking most slots", "No key took a slot.", "Every caller key has its own slots, up to 20 each")
	for _, wrong := range []string{"tokens, refilled", "No key took tokens", "own bucket."} {
		if strings.Contains(r.body, wrong) {
			t.Errorf("a keyed concurrency limit's page says %q", wrong)
		}
	}

	// Two slots of alice held: her lookup shows them, with the first
	// expiry as Redis has it.
	for _, id := range []string{"s1", "s2"} {
		if a, err := redisscript.RunSlot(ctx, e.rdb, e.ks, b.Name, "alice", "alpha", redisscript.SlotTake, id); err != nil ||
			a.Code != redisscript.Allowed {
			t.Fatalf("take %s: %+v %v", id, a, err)
		}
	}
	sl, err := redisscript.ReadSlots(ctx, e.rdb, e.ks, b.Name, "alice")
	if err != nil || sl.InUse != 2 {
		t.Fatalf("slots of alice: %+v %v", sl, err)
	}
	r = ob.get("/buckets/exports?key=alice")
	wantBody(t, "lookup", r, `<strong data-key-in-use>2</strong> of 20`, `data-unit="slots"`,
		`<dd data-key-next-expiry><time datetime="`+sl.NextExpiry.UTC().Format("2006-01-02T15:04:05Z"),
		`<dd data-key-limit>20 slots</dd>`, "the bucket's default limit", `name="max_permits" value="20"`)
	if strings.Contains(r.body, "data-key-tokens") || strings.Contains(r.body, "Tokens now") || strings.Contains(r.body, `name="rate"`) {
		t.Error("a keyed concurrency limit's key lookup shows tokens or a rate")
	}
	wantBody(t, "idle key", ob.get("/buckets/exports?key=bob"), `<strong data-key-in-use>0</strong> of 20`,
		`<dd data-key-next-expiry>no slot held</dd>`)

	// Overrides are a slot count: a rate is refused inline.
	r = ob.post("/buckets/exports/overrides", url.Values{"match": {"exact"}, "key": {"alice"}, "max_permits": {"50"}, "rate": {"1/s"}})
	wantStatus(t, "override with a rate", r, http.StatusUnprocessableEntity)
	wantBody(t, "override with a rate", r, `id="rate-error"`, "must be empty: a concurrency limit does not refill")
	r = ob.post("/buckets/exports/overrides", url.Values{"match": {"exact"}, "key": {"alice"}, "max_permits": {"50"}})
	wantStatus(t, "override", r, http.StatusSeeOther)
	r = vb.get("/buckets/exports")
	wantBody(t, "table", r, `<th scope="col" class="num">Slots</th>`, `<td class="num" data-label="Slots">50 slots</td>`)
	if strings.Contains(r.body, `<th scope="col">Rate</th>`) {
		t.Error("a keyed concurrency limit's overrides have a rate column")
	}
	r = ob.get("/buckets/exports?key=alice")
	wantBody(t, "lookup with override", r, `<strong data-key-in-use>2</strong> of 50`, `<dd data-key-limit>50 slots</dd>`,
		"the exact override")

	// The edit page: a slot count, previewed with calls that last.
	o, err := e.bkts.EffectiveOverride(ctx, b.Name, "alice")
	if err != nil || o == nil {
		t.Fatalf("override: %v %v", o, err)
	}
	edit := fmt.Sprintf("/buckets/exports/overrides/%d/edit", o.ID)
	r = ob.get(edit)
	wantStatus(t, "edit", r, http.StatusOK)
	wantBody(t, "edit", r, `<label for="o_max_permits">Slots</label>`, "each slot is held at most 30s unless renewed",
		"keeps the slots it holds", "At most 50 calls in progress at once for each matching key.", `id="hold"`)
	if strings.Contains(r.body, `name="rate"`) || strings.Contains(r.body, "current tokens") {
		t.Error("a concurrency limit's override form asks for a rate or speaks of tokens")
	}
	r = ob.post(edit, url.Values{"version": {"1"}, "max_permits": {"3"}, "preview": {"1"}, "steady": {"10"}, "duration": {"4"}, "hold": {"2"}})
	wantStatus(t, "edit preview", r, http.StatusOK)
	wantBody(t, "edit preview", r, "At most 3 calls in progress at once")
	r = ob.post(edit, url.Values{"version": {"1"}, "max_permits": {"3"}})
	wantStatus(t, "edit", r, http.StatusSeeOther)
	if o, _ = e.bkts.EffectiveOverride(ctx, b.Name, "alice"); o == nil || o.MaxPermits != 3 || !o.Rate.IsZero() {
		t.Fatalf("edited override %+v", o)
	}

	// Top keys count slot takes.
	hour := time.Now().Unix() / 3600
	if err := e.rdb.ZAdd(ctx, e.ks.TakenKeys(b.Name, hour), redis.Z{Score: 7, Member: "alice"}).Err(); err != nil {
		t.Fatal(err)
	}
	wantBody(t, "top keys", vb.get("/buckets/exports"), `<th scope="col" class="num">slot takes</th>`,
		`<code class="mono">alice</code></td><td class="num">7</td>`)
}

// TestKeyedQuotaKeys: a keyed quota's per-key part speaks of its quota: its
// default limit, a key's count this period and reset read from Redis, its
// top keys, and overrides that are a quota for the same period.
func TestKeyedQuotaKeys(t *testing.T) {
	e, ob, vb := bucketFixture(t)
	b := e.keyedQuota("api-month", "alpha")
	ctx := context.Background()

	r := vb.get("/buckets/api-month")
	wantStatus(t, "page", r, http.StatusOK)
	wantBody(t, "page", r, "Every caller key gets its own quota: 10,000 per month, resets on the 1st at 00:00 Europe/Berlin.",
		"Calling most", "No key was allowed a call.", "Every caller key has its own count this period, up to 10,000 each")
	for _, wrong := range []string{"tokens, refilled", "No key took tokens", "own bucket."} {
		if strings.Contains(r.body, wrong) {
			t.Errorf("a keyed quota's page says %q", wrong)
		}
	}

	if a, err := redisscript.AcquireKey(ctx, e.rdb, e.ks, b.Name, "bob", "alpha", 7); err != nil || a.Code != redisscript.Allowed {
		t.Fatalf("acquire: %+v %v", a, err)
	}
	st, err := redisscript.ReadKeyState(ctx, e.rdb, e.ks, b.Name, "bob")
	if err != nil {
		t.Fatal(err)
	}
	used, _, reset, ok := st.Quota(b.ID)
	if !ok || used != 7 {
		t.Fatalf("bob's quota state %+v: used %d, ok %v", st, used, ok)
	}
	r = ob.get("/buckets/api-month?key=bob")
	wantBody(t, "lookup", r, `<strong data-key-used>7</strong> of 10,000`,
		`<dd data-key-reset><time datetime="`+reset.UTC().Format("2006-01-02T15:04:05Z"),
		`<dd data-key-limit>10,000 per month</dd>`, `name="max_permits" value="10000"`)
	if strings.Contains(r.body, "data-key-tokens") || strings.Contains(r.body, "Tokens now") || strings.Contains(r.body, `name="rate"`) {
		t.Error("a keyed quota's key lookup shows tokens or a rate")
	}
	wantBody(t, "unused key", ob.get("/buckets/api-month?key=carol"), `<strong data-key-used>0</strong> of 10,000`)

	r = ob.post("/buckets/api-month/overrides", url.Values{"match": {"prefix"}, "key": {"b"}, "max_permits": {"500"}, "rate": {"1/s"}})
	wantStatus(t, "override with a rate", r, http.StatusUnprocessableEntity)
	wantBody(t, "override with a rate", r, `id="rate-error"`, "must be empty: a quota limit does not refill")
	r = ob.post("/buckets/api-month/overrides", url.Values{"match": {"prefix"}, "key": {"b"}, "max_permits": {"500"}})
	wantStatus(t, "override", r, http.StatusSeeOther)
	r = vb.get("/buckets/api-month")
	wantBody(t, "table", r, `<th scope="col" class="num">Quota</th>`, `<td class="num" data-label="Quota">500 per month</td>`)
	if strings.Contains(r.body, `<th scope="col">Rate</th>`) {
		t.Error("a keyed quota's overrides have a rate column")
	}
	wantBody(t, "lookup with override", ob.get("/buckets/api-month?key=bob"), `<strong data-key-used>7</strong> of 500`,
		`<dd data-key-limit>500 per month</dd>`, "the prefix override")

	o, err := e.bkts.EffectiveOverride(ctx, b.Name, "bob")
	if err != nil || o == nil {
		t.Fatalf("override: %v %v", o, err)
	}
	r = ob.get(fmt.Sprintf("/buckets/api-month/overrides/%d/edit", o.ID))
	wantStatus(t, "edit", r, http.StatusOK)
	wantBody(t, "edit", r, `<label for="o_max_permits">Quota</label>`, "the period and its time zone are the bucket&#39;s",
		"keeps its count of this month", "500 calls per month for each matching key.")
	if strings.Contains(r.body, `name="rate"`) || strings.Contains(r.body, `id="preview"`) {
		t.Error("a quota's override form asks for a rate or offers a token preview")
	}

	hour := time.Now().Unix() / 3600
	if err := e.rdb.ZAdd(ctx, e.ks.TakenKeys(b.Name, hour), redis.Z{Score: 7, Member: "bob"}).Err(); err != nil {
		t.Fatal(err)
	}
	wantBody(t, "top keys", vb.get("/buckets/api-month"), `<th scope="col" class="num">calls allowed</th>`,
		`<code class="mono">bob</code></td><td class="num">7</td>`)
}
