package console

import (
	"context"
	"net/http"
	"net/url"
	"testing"

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

	cfg := redisscript.Config{Name: b.Name, ID: b.ID, Version: b.Version, Capacity: 2, Apps: b.AllowedApps,
		Kind: redisscript.KindConcurrency, SlotMillis: b.SlotMillis}
	if _, err := redisscript.Apply(context.Background(), e.rdb, e.ks, cfg, false); err != nil {
		t.Fatal(err)
	}
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
