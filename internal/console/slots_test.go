package console

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/client/usage"
	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/redisscript"
)

// TestConcurrencyLimitForm: a concurrency limit is created from the form
// with its slot lease time (a bad one comes back inline), previewed with
// calls that last, and shown with its slots in use.
func TestConcurrencyLimitForm(t *testing.T) {
	e, ob, _ := bucketFixture(t)
	wantBody(t, "new form", ob.get("/buckets/new"), `<label for="slot_ms">Slot lease time</label>`,
		`<option value="concurrency"`, `id="hold"`)

	form := url.Values{"name": {"exports"}, "owner_app": {"alpha"}, "kind": {"concurrency"}, "max_permits": {"2"},
		"slot_ms": {"soon"}}
	r := ob.post("/buckets", form)
	wantStatus(t, "slot lease not a duration", r, http.StatusUnprocessableEntity)
	wantBody(t, "slot lease not a duration", r, `id="slot_ms-error"`, `value="soon"`)
	form.Set("slot_ms", "5ms")
	wantBody(t, "slot lease too short", ob.post("/buckets", form), `id="slot_ms-error"`, "from 10")

	// Preview: 10 calls a second lasting 2 s against 2 slots.
	pv := url.Values{"preview": {"1"}, "steady": {"10"}, "duration": {"4"}, "hold": {"2"}}
	for k, v := range form {
		pv[k] = v
	}
	pv.Set("slot_ms", "2m")
	r = ob.post("/buckets", pv)
	wantStatus(t, "preview", r, http.StatusOK)
	wantBody(t, "preview", r, "At most 2 calls in progress at once", "4 allowed, 36 denied")

	form.Set("slot_ms", "2m")
	r = ob.post("/buckets", form)
	wantStatus(t, "valid", r, http.StatusSeeOther)
	b, err := e.bkts.Get(context.Background(), "exports")
	if err != nil || b.Kind != buckets.KindConcurrency || b.SlotMillis != 120_000 || b.MaxPermits != 2 {
		t.Fatalf("saved %+v %v", b, err)
	}
	wantBody(t, "detail before sync", ob.get("/buckets/exports"), "at most 2 calls in progress at once", "2m0s")
	wantBody(t, "edit form", ob.get("/buckets/exports/edit"), `value="2m0s"`, `id="hold"`)

	e.applyBucket(b)
	if a, err := redisscript.RunSlot(context.Background(), e.rdb, e.ks, b.Name, "", "alpha", redisscript.SlotTake, "s1"); err != nil ||
		a.Code != redisscript.Allowed {
		t.Fatalf("take: %+v %v", a, err)
	}
	r = ob.get("/buckets/exports")
	wantBody(t, "live", r, `id="slots-in-use">1</div>`, `slots in use of <span data-live-capacity>2</span>`,
		`<span data-live-tokens>1</span> free`, `data-unit="slots"`, "First slot expires")
	wantBody(t, "list", ob.get("/buckets"), "slots: on its page")
	r = ob.get("/buckets/exports/state.json")
	wantBody(t, "state.json", r, `"in_use":1`, `"tokens":1`, `"next_expiry":"`)
}

// TestConcurrencyLimitUsage: slot takes a client observed (a Recorder as
// its observer) show on a concurrency limit's page as its usage, named
// slot takes and without a limit per minute. (The lists of limits that
// denied read the same counts once a minute is rolled up.)
func TestConcurrencyLimitUsage(t *testing.T) {
	e := newEnv(t)
	olga := e.user("olga", false)
	e.app("shop", "olga")
	b := &buckets.Bucket{Name: "shop-exports", OwnerApp: "shop", Kind: buckets.KindConcurrency, MaxPermits: 2,
		SlotMillis: 600_000}
	if err := e.bkts.Create(context.Background(), e.system, b); err != nil {
		t.Fatal(err)
	}
	e.applyBucket(b)
	rec, err := usage.NewRecorder(e.rdb, "shop", usage.WithKeyPrefix(e.ks.Prefix), usage.WithFlushInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	lim, err := client.New(e.rdb, "shop", client.WithKeyPrefix(e.ks.Prefix), client.WithObserver(rec.Observe),
		client.WithTimeout(5*time.Second), client.WithFailurePolicy(client.FailClosed))
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	for i := range 5 { // two taken, three denied
		if s, err := lim.TakeSlot(context.Background(), b.Name); err != nil || s.Allowed != (i < 2) {
			t.Fatalf("take %d: %+v %v", i, s.SlotResult, err)
		}
	}
	if err := rec.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	br := e.browser()
	br.signIn(olga)
	r := br.get("/buckets/shop-exports")
	wantStatus(t, "page", r, http.StatusOK)
	wantRow(t, "shop, last hour", usageRow(t, r.body, "shop"), "shop", "2", "3", "60%")
	wantBody(t, "page", r, "shop: 2 allowed, 3 denied", "Slot takes per minute, last hour",
		"<dt>of slot takes denied</dt><dd>60%</dd>", "<figcaption>Slot takes per app and minute")
	if strings.Contains(r.body, "chart-limit") || strings.Contains(r.body, "Acquires per") {
		t.Error("a concurrency limit's chart has a limit per minute, or counts acquires")
	}
}
