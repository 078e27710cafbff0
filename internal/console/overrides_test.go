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
)

func TestOverridesOnAKeyedBucketsPage(t *testing.T) {
	e, ob, vb := bucketFixture(t)
	e.keyedBucket("per-key", "alpha")
	e.bucket("shared", "alpha")
	ctx := context.Background()

	r := ob.get("/buckets/per-key")
	wantStatus(t, "keyed detail", r, http.StatusOK)
	wantBody(t, "keyed detail", r, "Per-key limits", "<strong>Default limit</strong>: 10 tokens, refilled 100 per minute",
		"No overrides: every key gets the default limit.", "Add an override", "No key was denied.", "Look up a key")
	if r := ob.get("/buckets/shared"); strings.Contains(r.body, "Per-key limits") {
		t.Error("an unkeyed bucket shows per-key limits")
	}

	// Invalid input comes back inline, as typed.
	r = ob.post("/buckets/per-key/overrides", url.Values{"match": {"exact"}, "key": {""}, "max_permits": {"lots"}, "rate": {"fast"}})
	wantStatus(t, "invalid override", r, http.StatusUnprocessableEntity)
	wantBody(t, "invalid override", r, `id="key-error"`, `id="max_permits-error"`, `id="rate-error"`, `value="lots"`, `value="fast"`)

	r = ob.post("/buckets/per-key/overrides", url.Values{"match": {"prefix"}, "key": {"premium:"}, "max_permits": {"1,000"}, "rate": {"1000 per minute"}})
	wantStatus(t, "add prefix", r, http.StatusSeeOther)
	for i := range 30 {
		o := &buckets.Override{Bucket: "per-key", Match: buckets.MatchExact, Key: fmt.Sprintf("premium:%02d", i), MaxPermits: 5,
			Rate: buckets.Rate{PermitsMicro: 1_000_000, Period: time.Second}}
		if err := e.bkts.CreateOverride(ctx, e.system, o); err != nil {
			t.Fatal(err)
		}
	}
	r = ob.post("/buckets/per-key/overrides", url.Values{"match": {"exact"}, "key": {"basic:1"}, "max_permits": {"1"}, "rate": {"1/min"}})
	wantStatus(t, "add exact", r, http.StatusSeeOther)
	r = ob.post("/buckets/per-key/overrides", url.Values{"match": {"exact"}, "key": {"basic:1"}, "max_permits": {"1"}, "rate": {"1/min"}})
	wantStatus(t, "duplicate", r, http.StatusConflict)
	wantBody(t, "duplicate", r, `id="key-error"`)

	// The table pages and searches by key prefix; viewers read it.
	r = vb.get("/buckets/per-key?oq=premium")
	wantStatus(t, "search", r, http.StatusOK)
	wantBody(t, "search", r, "31 overrides with a key starting with “premium”", "1000 per minute", `rel="next"`)
	if n := strings.Count(r.body, "data-override="); n != overridesPageSize {
		t.Errorf("first page shows %d overrides, want %d", n, overridesPageSize)
	}
	if strings.Contains(r.body, "basic:1") || strings.Contains(r.body, "Add an override") || strings.Contains(r.body, "/delete") {
		t.Error("the search shows another key, or the viewer is offered changes")
	}
	i := strings.Index(r.body, `oafter=`)
	next := r.body[i+len("oafter=") : i+strings.IndexByte(r.body[i:], '#')]
	r = vb.get("/buckets/per-key?oq=premium&oafter=" + next)
	wantStatus(t, "second page", r, http.StatusOK)
	if n := strings.Count(r.body, "data-override="); n != 31-overridesPageSize {
		t.Errorf("second page shows %d overrides, want %d", n, 31-overridesPageSize)
	}
	wantBody(t, "second page", r, "premium:29", "First page")

	// A viewer cannot add one.
	r = vb.post("/buckets/per-key/overrides", url.Values{"match": {"exact"}, "key": {"v"}, "max_permits": {"1"}, "rate": {"1/s"}})
	wantStatus(t, "viewer adds", r, http.StatusForbidden)

	// Top keys come from Redis; a key's state and limit from its lookup.
	hour := time.Now().Unix() / 3600
	if err := e.rdb.ZAdd(ctx, e.ks.DeniedKeys("per-key", hour), redis.Z{Score: 42, Member: "basic:9"}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := e.rdb.ZAdd(ctx, e.ks.TakenKeys("per-key", hour-3), redis.Z{Score: 1234, Member: "day:1"}).Err(); err != nil {
		t.Fatal(err)
	}
	r = vb.get("/buckets/per-key")
	wantBody(t, "top keys", r, "Denied most", `<code class="mono">basic:9</code></td><td class="num">42</td>`, "No key took tokens.")
	r = vb.get("/buckets/per-key?keys=day")
	wantBody(t, "top keys of the day", r, `<code class="mono">day:1</code></td><td class="num">1,234</td>`)
	r = vb.get("/buckets/per-key?key=" + url.QueryEscape("premium:x"))
	wantBody(t, "key lookup", r, `data-key-override>the prefix override <code class="mono">premium:</code>`, "data-key-tokens")
	if strings.Contains(r.body, "data-add-override") {
		t.Error("a viewer is offered to add an override")
	}
	r = ob.get("/buckets/per-key?key=" + url.QueryEscape("premium:x"))
	wantBody(t, "owner's key lookup", r, "data-add-override", `name="key" value="premium:x"`, `name="max_permits" value="1000"`)

	// Deleting asks first, then deletes that version.
	o, err := e.bkts.EffectiveOverride(ctx, "per-key", "basic:1")
	if err != nil || o == nil {
		t.Fatalf("override basic:1: %v %v", o, err)
	}
	path := fmt.Sprintf("/buckets/per-key/overrides/%d/delete", o.ID)
	r = ob.get(path)
	wantStatus(t, "confirm", r, http.StatusOK)
	wantBody(t, "confirm", r, "Delete the override for “basic:1”?", `name="version" value="1"`)
	wantStatus(t, "viewer confirm", vb.get(path), http.StatusForbidden)
	wantStatus(t, "no version", ob.post(path, nil), http.StatusUnprocessableEntity)
	o.Description = "changed meanwhile"
	if err := e.bkts.UpdateOverride(ctx, e.system, o); err != nil {
		t.Fatal(err)
	}
	r = ob.post(path, url.Values{"version": {"1"}})
	wantStatus(t, "stale delete", r, http.StatusPreconditionFailed)
	wantBody(t, "stale delete", r, `id="stale"`, "was changed by someone else (now version 2, your change was based on version 1)", `name="version" value="2"`)
	r = ob.post(path, url.Values{"version": {"2"}})
	wantStatus(t, "delete", r, http.StatusSeeOther)
	if o, _ := e.bkts.EffectiveOverride(ctx, "per-key", "basic:1"); o != nil {
		t.Fatalf("override still there: %+v", o)
	}
	wantStatus(t, "deleted", ob.get(path), http.StatusNotFound)
	wantStatus(t, "bad id", ob.get("/buckets/per-key/overrides/abc/delete"), http.StatusNotFound)
}

func TestKeyedBucketShowsPerKeyState(t *testing.T) {
	e, ob, _ := bucketFixture(t)
	b := e.keyedBucket("per-key", "alpha")
	wantBody(t, "before sync", ob.get("/buckets/per-key"), "not in Redis yet")
	cfg := redisscript.Config{Name: b.Name, ID: b.ID, Version: b.Version, Capacity: b.MaxPermits,
		PermitsMicro: b.Rate.PermitsMicro, PeriodSeconds: b.Rate.PeriodSeconds(), Apps: b.AllowedApps}
	if _, err := redisscript.ApplyKeyed(context.Background(), e.rdb, e.ks, cfg, false); err != nil {
		t.Fatal(err)
	}
	r := ob.get("/buckets/per-key")
	wantBody(t, "synced", r, "in sync", `<span class="badge badge-accent">per-key state</span>`, "up to 10 each")
	if strings.Contains(r.body, "not in Redis yet") || strings.Contains(r.body, "data-live-tokens") {
		t.Error("a keyed bucket is shown as missing or with one token count")
	}
	wantBody(t, "synced", r, `<dd id="key-groups">64 of 64 hold version 1</dd>`)

	// A change the sync worker has written to some groups only: the others
	// still serve version 1 to their keys, so the bucket is not in sync,
	// and the definition shown is the oldest still in use.
	b.MaxPermits = 20
	if err := e.bkts.Update(context.Background(), e.system, b); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for g := range 40 {
		if err := e.rdb.HSet(ctx, e.ks.KeyGroup(b.Name, g), redisscript.FieldVersion, "2", redisscript.FieldCapacity, "20").Err(); err != nil {
			t.Fatal(err)
		}
	}
	r = ob.get("/buckets/per-key")
	wantBody(t, "partly synced", r, `<dd id="key-groups">40 of 64 hold version 2</dd>`, "version 1", "up to 10 each")
	if strings.Contains(r.body, "in sync") {
		t.Error("a bucket with groups of an older version shows as in sync")
	}
	// Group 63 lost: still pending, and the others are read.
	if err := e.rdb.Del(ctx, e.ks.KeyGroup(b.Name, 63)).Err(); err != nil {
		t.Fatal(err)
	}
	for g := 40; g < 63; g++ {
		if err := e.rdb.HSet(ctx, e.ks.KeyGroup(b.Name, g), redisscript.FieldVersion, "2", redisscript.FieldCapacity, "20").Err(); err != nil {
			t.Fatal(err)
		}
	}
	r = ob.get("/buckets/per-key")
	wantBody(t, "one group missing", r, `<dd id="key-groups">63 of 64 hold version 2</dd>`, "up to 20 each")
	if strings.Contains(r.body, "in sync") {
		t.Error("a bucket with a missing group shows as in sync")
	}
}
