package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/audit"
)

func TestBucketCreate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.user("olivia")
	e.app("alpha", "olivia")
	e.app("beta", "olivia")

	r := e.must(201, owner, "POST", "/api/v1/buckets", map[string]any{
		"name": "checkout", "owner_app": "alpha", "description": "Checkout calls",
		"max_permits": 100, "rate": "0.5 per second", "allowed_apps": []string{"beta", "alpha", "beta"},
	})
	var b bucketJSON
	r.decode(t, &b)
	want := bucketJSON{Name: "checkout", OwnerApp: "alpha", Description: "Checkout calls", MaxPermits: 100,
		Rate: "0.5/s", RatePermits: 0.5, RatePeriodSeconds: 1, AllowedApps: []string{"alpha", "beta"},
		Version: 1, CreatedBy: "olivia", UpdatedBy: "olivia"}
	if fmt.Sprintf("%+v", b) != fmt.Sprintf("%+v", want) {
		t.Errorf("created\n%+v\nwant\n%+v", b, want)
	}
	if r.header.Get("ETag") != `"1"` || r.header.Get("Location") != "/api/v1/buckets/checkout" {
		t.Errorf("ETag %q Location %q", r.header.Get("ETag"), r.header.Get("Location"))
	}
	// rate_permits is an exact decimal in the JSON text, not a float rendering.
	if !strings.Contains(string(r.body), `"rate_permits":0.5,`) {
		t.Errorf("body %s", r.body)
	}
	// Defaults: allowed apps = the owner app.
	e.must(201, owner, "POST", "/api/v1/buckets", map[string]any{"name": "plain", "owner_app": "alpha", "max_permits": 1, "rate": "7/90s"}).decode(t, &b)
	if fmt.Sprint(b.AllowedApps) != "[alpha]" || b.Rate != "7/90s" || b.RatePeriodSeconds != 90 || b.RatePermits != 7 {
		t.Errorf("defaults: %+v", b)
	}
	entries := e.auditEntries(audit.Filter{Action: "bucket.create", ObjectName: "checkout"})
	if len(entries) != 1 || entries[0].Actor != "olivia (api token ci)" || entries[0].App != "alpha" {
		t.Errorf("audit rows %+v", entries)
	}

	// The rules are the application layer's (internal/manage, internal/buckets
	// tests); here: every field error reaches the body.
	t.Run("validation", func(t *testing.T) {
		b := e.must(422, owner, "POST", "/api/v1/buckets", map[string]any{
			"name": "Bad Name", "owner_app": "alpha", "max_permits": 0, "rate": "fast",
			"allowed_apps": []string{"NOT OK"},
		}).errorBody(t)
		for _, f := range []string{"name", "max_permits", "rate", "allowed_apps"} {
			if b.reasonFor(f) == "" {
				t.Errorf("no reason for %s: %+v", f, b.Error)
			}
		}
		if !strings.Contains(b.reasonFor("rate"), "100/min") {
			t.Errorf("rate reason %q should show the syntax", b.reasonFor("rate"))
		}
	})
	t.Run("malformed", func(t *testing.T) {
		for _, body := range []string{
			`{"name":"x","owner_app":"alpha","max_permits":1,"rate":"1/s","version":1}`,      // read-only field
			`{"name":"x","owner_app":"alpha","max_permits":1,"rate":"1/s","rate_permits":1}`, // read-only field
			`{"name":"x","owner_app":"alpha","max_permits":1.5,"rate":"1/s"}`,
			`{"name":"x","owner_app":"alpha","max_permits":"1","rate":"1/s"}`,
			`{"name":"x","owner_app":"alpha","max_permits":1,"rate":1}`,
			`{"name":"x","allowed_apps":"alpha"}`,
			`{"name":"x"} {}`,
			`nonsense`,
			``,
		} {
			r := e.call(owner, "POST", "/api/v1/buckets", body)
			if r.status != 400 {
				t.Errorf("%s: status %d: %s", body, r.status, r.body)
				continue
			}
			if b := r.errorBody(t); b.Error.Code != "bad_request" {
				t.Errorf("%s: %+v", body, b.Error)
			}
		}
		r := e.call(owner, "POST", "/api/v1/buckets", "name=x", "Content-Type", "application/x-www-form-urlencoded")
		if r.status != http.StatusUnsupportedMediaType {
			t.Errorf("form body: %d", r.status)
		}
		big := `{"name":"x","description":"` + strings.Repeat("x", 70_000) + `"}`
		if r := e.call(owner, "POST", "/api/v1/buckets", big); r.status != http.StatusRequestEntityTooLarge {
			t.Errorf("large body: %d", r.status)
		}
	})
	t.Run("conflict", func(t *testing.T) {
		b := e.must(409, owner, "POST", "/api/v1/buckets", map[string]any{
			"name": "checkout", "owner_app": "beta", "max_permits": 1, "rate": "1/s",
		}).errorBody(t)
		if b.Error.Code != "conflict" || !strings.Contains(b.Error.Message, "checkout") {
			t.Errorf("%+v", b.Error)
		}
	})
}

func TestBucketList(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.user("olivia")
	e.app("alpha", "olivia")
	e.app("beta", "olivia")
	for i := range 7 {
		e.bucket(fmt.Sprintf("alpha-%d", i), "alpha")
	}
	e.bucket("beta-0", "beta")
	e.bucket("beta_x", "beta", "alpha")
	e.bucket("betaxx", "beta")

	list := func(query string) bucketList {
		var l bucketList
		e.must(200, owner, "GET", "/api/v1/buckets?"+query, nil).decode(t, &l)
		return l
	}
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("pagination does not end")
		}
		l := list("limit=3&cursor=" + cursor)
		if l.Total != 10 || len(l.Buckets) > 3 {
			t.Fatalf("total %d, %d on a page", l.Total, len(l.Buckets))
		}
		for _, b := range l.Buckets {
			got = append(got, b.Name)
		}
		if l.NextCursor == "" {
			break
		}
		cursor = l.NextCursor
	}
	if len(got) != 10 || got[0] != "alpha-0" || got[9] != "betaxx" {
		t.Errorf("pages: %v", got)
	}
	// search is literal: "_" matches only itself.
	if l := list("search=BETA_"); l.Total != 1 || l.Buckets[0].Name != "beta_x" {
		t.Errorf("search beta_: %+v", l)
	}
	// app keeps buckets the app owns or is allowed on.
	if l := list("app=alpha&limit=500"); l.Total != 8 {
		t.Errorf("app=alpha: total %d, want 8", l.Total)
	}
	if l := list("app=alpha&search=beta"); l.Total != 1 || l.Buckets[0].Name != "beta_x" {
		t.Errorf("app=alpha&search=beta: %+v", l)
	}
	for _, q := range []string{"limit=0", "limit=x", "cursor=abc", "app=Not%20Valid", "search=" + strings.Repeat("a", 64), "app=a&app=b"} {
		if b := e.must(400, owner, "GET", "/api/v1/buckets?"+q, nil).errorBody(t); len(b.Error.Fields) != 1 {
			t.Errorf("?%s: %+v", q, b.Error)
		}
	}
}

func TestBucketUpdate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.user("olivia")
	e.app("alpha", "olivia")
	e.app("beta", "olivia")
	e.bucket("api", "alpha", "alpha", "beta")
	path := "/api/v1/buckets/api"

	get := func() (bucketJSON, string) {
		r := e.must(200, owner, "GET", path, nil)
		var b bucketJSON
		r.decode(t, &b)
		return b, r.header.Get("ETag")
	}
	b, tag := get()
	if tag != `"1"` || b.Version != 1 {
		t.Fatalf("ETag %q version %d", tag, b.Version)
	}

	t.Run("put replaces", func(t *testing.T) {
		r := e.must(200, owner, "PUT", path, map[string]any{"name": "api", "owner_app": "alpha", "max_permits": 50, "rate": "100/min"}, "If-Match", tag)
		var got bucketJSON
		r.decode(t, &got)
		if got.Version != 2 || got.MaxPermits != 50 || got.Rate != "100/min" || fmt.Sprint(got.AllowedApps) != "[alpha]" || r.header.Get("ETag") != `"2"` {
			t.Errorf("after PUT: %+v, ETag %q", got, r.header.Get("ETag"))
		}
	})
	t.Run("stale if-match", func(t *testing.T) {
		b := e.must(412, owner, "PUT", path, map[string]any{"max_permits": 1, "rate": "1/s"}, "If-Match", tag).errorBody(t)
		if b.Error.Code != "precondition_failed" {
			t.Errorf("%+v", b.Error)
		}
		e.must(412, owner, "PATCH", path, map[string]any{"max_permits": 1}, "If-Match", tag)
		e.must(412, owner, "DELETE", path, nil, "If-Match", tag)
		e.must(412, owner, "DELETE", path, nil, "If-Match", `"abc"`)
		if now, _ := get(); now.Version != 2 || now.MaxPermits != 50 {
			t.Errorf("a stale change applied: %+v", now)
		}
	})
	t.Run("missing or bad if-match", func(t *testing.T) {
		b := e.must(428, owner, "PUT", path, map[string]any{"max_permits": 1, "rate": "1/s"}).errorBody(t)
		if b.Error.Code != "precondition_required" {
			t.Errorf("%+v", b.Error)
		}
		e.must(428, owner, "PATCH", path, map[string]any{"max_permits": 1})
		e.must(428, owner, "DELETE", path, nil)
		e.must(400, owner, "PATCH", path, map[string]any{"max_permits": 1}, "If-Match", `W/"2"`)
		e.must(400, owner, "PATCH", path, map[string]any{"max_permits": 1}, "If-Match", `2`)
	})
	t.Run("patch changes only what is given", func(t *testing.T) {
		r := e.must(200, owner, "PATCH", path, map[string]any{"description": "hot path", "allowed_apps": []string{"beta", "alpha"}}, "If-Match", `"2"`)
		var got bucketJSON
		r.decode(t, &got)
		if got.Version != 3 || got.Description != "hot path" || got.MaxPermits != 50 || got.Rate != "100/min" || fmt.Sprint(got.AllowedApps) != "[alpha beta]" {
			t.Errorf("after PATCH: %+v", got)
		}
		r = e.call(owner, "PATCH", path, `{"rate":"5/h"}`, "If-Match", `"3"`, "Content-Type", "application/merge-patch+json")
		if r.status != 200 {
			t.Fatalf("merge patch: %d %s", r.status, r.body)
		}
	})
	t.Run("no-op patch keeps the version", func(t *testing.T) {
		before, tag := get()
		r := e.must(200, owner, "PATCH", path, map[string]any{"rate": before.Rate, "max_permits": before.MaxPermits}, "If-Match", tag)
		if r.header.Get("ETag") != tag {
			t.Errorf("ETag %q after a no-op, want %q", r.header.Get("ETag"), tag)
		}
	})
	t.Run("validation", func(t *testing.T) {
		b := e.must(422, owner, "PATCH", path, map[string]any{"max_permits": -1, "rate": "1/forever"}, "If-Match", "*").errorBody(t)
		if b.reasonFor("max_permits") == "" || b.reasonFor("rate") == "" {
			t.Errorf("%+v", b.Error)
		}
		b = e.must(422, owner, "PUT", path, map[string]any{"description": "no limits"}, "If-Match", "*").errorBody(t)
		if b.reasonFor("max_permits") == "" || b.reasonFor("rate") == "" {
			t.Errorf("PUT without the required fields: %+v", b.Error)
		}
		e.must(400, owner, "PATCH", path, map[string]any{"version": 9}, "If-Match", "*")
		if now, _ := get(); now.Version != 4 {
			t.Errorf("a refused change applied: version %d", now.Version)
		}
	})
	t.Run("delete", func(t *testing.T) {
		_, tag := get()
		e.must(204, owner, "DELETE", path, nil, "If-Match", tag)
		e.must(404, owner, "GET", path, nil)
		e.must(404, owner, "DELETE", path, nil, "If-Match", "*")
		e.must(404, owner, "PATCH", path, map[string]any{"max_permits": 1}, "If-Match", "*")
		entries := e.auditEntries(audit.Filter{ObjectType: "bucket", ObjectName: "api"})
		if len(entries) < 5 || entries[0].Action != "bucket.delete" {
			t.Errorf("audit trail of the bucket: %d entries, newest %+v", len(entries), entries[0])
		}
	})
}

func TestBucketModeFields(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.user("olivia")
	e.app("alpha", "olivia")
	r := e.must(201, owner, "POST", "/api/v1/buckets", map[string]any{"name": "per-key", "owner_app": "alpha",
		"max_permits": 10, "rate": "1/s", "keyed": true, "shadow": true, "lease_ms": 250})
	var got bucketJSON
	r.decode(t, &got)
	if !got.Keyed || !got.Shadow || got.LeaseMillis != 250 {
		t.Fatalf("created: %+v", got)
	}
	// The raw body names the fields as documented.
	var raw map[string]any
	r = e.must(200, owner, "GET", "/api/v1/buckets/per-key", nil)
	r.decode(t, &raw)
	if raw["keyed"] != true || raw["shadow"] != true || raw["lease_ms"] != float64(250) {
		t.Fatalf("GET body: %v", raw)
	}
	path := "/api/v1/buckets/per-key"
	// Which modes may change is the application layer's rule
	// (internal/manage tests); here: the fields reach it and come back.
	b := e.must(422, owner, "PATCH", path, map[string]any{"keyed": false}, "If-Match", "*").errorBody(t)
	if b.reasonFor("keyed") == "" {
		t.Errorf("unkeying: %+v", b.Error)
	}
	r = e.must(200, owner, "PATCH", path, map[string]any{"shadow": false, "lease_ms": 0}, "If-Match", `"1"`)
	r.decode(t, &got)
	if got.Version != 2 || !got.Keyed || got.Shadow || got.LeaseMillis != 0 {
		t.Errorf("after PATCH: %+v", got)
	}
}

func TestBucketKind(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.user("olivia")
	e.app("alpha", "olivia")
	var raw map[string]any
	e.must(201, owner, "POST", "/api/v1/buckets", map[string]any{"name": "plain", "owner_app": "alpha",
		"max_permits": 10, "rate": "1/s"}).decode(t, &raw)
	if raw["kind"] != "bucket" {
		t.Fatalf("a bucket created without a kind: %v", raw)
	}
	e.must(201, owner, "POST", "/api/v1/buckets", map[string]any{"name": "inflight", "owner_app": "alpha",
		"kind": "concurrency", "max_permits": 20, "keyed": true}).decode(t, &raw)
	if raw["kind"] != "concurrency" || raw["rate"] != "" || raw["rate_period_seconds"] != float64(0) {
		t.Fatalf("concurrency limit: %v", raw)
	}
	b := e.must(422, owner, "POST", "/api/v1/buckets", map[string]any{"name": "x", "owner_app": "alpha",
		"kind": "window", "max_permits": 1, "rate": "1/s"}).errorBody(t)
	if b.reasonFor("kind") == "" {
		t.Errorf("unknown kind: %+v", b.Error)
	}
	b = e.must(422, owner, "POST", "/api/v1/buckets", map[string]any{"name": "x", "owner_app": "alpha",
		"kind": "quota", "max_permits": 1, "rate": "1/s"}).errorBody(t)
	if b.reasonFor("rate") == "" {
		t.Errorf("a quota with a rate: %+v", b.Error)
	}
	b = e.must(422, owner, "PATCH", "/api/v1/buckets/plain", map[string]any{"kind": "quota"}, "If-Match", "*").errorBody(t)
	if b.reasonFor("kind") == "" {
		t.Errorf("changing the kind: %+v", b.Error)
	}
	// An override of a concurrency limit has no rate; one with a rate is refused.
	base := "/api/v1/buckets/inflight/overrides"
	e.must(201, owner, "POST", base, map[string]any{"match": "exact", "key": "big", "max_permits": 100})
	b = e.must(422, owner, "POST", base, map[string]any{"match": "exact", "key": "k", "max_permits": 1, "rate": "1/s"}).errorBody(t)
	if b.reasonFor("rate") == "" {
		t.Errorf("a concurrency override with a rate: %+v", b.Error)
	}
}

func TestOverrides(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.user("olivia")
	e.app("alpha", "olivia")
	e.keyedBucket("per-key", "alpha")
	e.bucket("shared", "alpha")
	base := "/api/v1/buckets/per-key/overrides"

	// The rules, permissions, no-ops and conflicts are the application
	// layer's (internal/manage tests); here: how they reach the client.
	b := e.must(422, owner, "POST", base, map[string]any{"match": "fuzzy", "key": "", "max_permits": 0, "rate": "x"}).errorBody(t)
	for _, f := range []string{"match", "key", "max_permits", "rate"} {
		if b.reasonFor(f) == "" {
			t.Errorf("no reason for %s: %+v", f, b.Error)
		}
	}
	e.must(400, owner, "POST", base, map[string]any{"match": "exact", "key": "k", "max_permits": 1, "rate": "1/s", "version": 3})
	r := e.must(201, owner, "POST", base, map[string]any{"match": "prefix", "key": "premium:", "max_permits": 100, "rate": "100/min"})
	var o overrideJSON
	r.decode(t, &o)
	if o.ID == 0 || o.Match != "prefix" || o.Key != "premium:" || o.Rate != "100/min" || o.Version != 1 ||
		r.header.Get("Location") != fmt.Sprintf("%s/%d", base, o.ID) || r.header.Get("ETag") != `"1"` {
		t.Fatalf("created %+v, headers %v", o, r.header)
	}
	e.must(409, owner, "POST", base, map[string]any{"match": "prefix", "key": "premium:", "max_permits": 1, "rate": "1/s"})
	for i := range 3 {
		e.must(201, owner, "POST", base, map[string]any{"match": "exact", "key": fmt.Sprintf("premium:%d", i), "max_permits": 1, "rate": "1/s"})
	}
	e.must(201, owner, "POST", base, map[string]any{"match": "exact", "key": "basic:1", "max_permits": 1, "rate": "1/s"})

	var list struct {
		Overrides  []overrideJSON `json:"overrides"`
		NextCursor string         `json:"next_cursor"`
		Total      int            `json:"total"`
	}
	e.must(200, owner, "GET", base+"?search=premium&limit=3", nil).decode(t, &list)
	if list.Total != 4 || len(list.Overrides) != 3 || list.NextCursor == "" || list.Overrides[0].Key != "premium:" {
		t.Fatalf("first page: %+v", list)
	}
	cursor := list.NextCursor
	list.NextCursor = ""
	e.must(200, owner, "GET", base+"?search=premium&limit=3&cursor="+cursor, nil).decode(t, &list)
	if len(list.Overrides) != 1 || list.NextCursor != "" || list.Overrides[0].Key != "premium:2" {
		t.Fatalf("second page: %+v", list)
	}
	e.must(200, owner, "GET", base+"?match=prefix", nil).decode(t, &list)
	if list.Total != 1 {
		t.Errorf("prefix overrides: %+v", list)
	}
	e.must(400, owner, "GET", base+"?match=fuzzy", nil)
	e.must(400, owner, "GET", "/api/v1/buckets/per-key/overrides?cursor="+nextCursorOf(t, e, owner), nil)

	path := fmt.Sprintf("%s/%d", base, o.ID)
	e.must(404, owner, "GET", base+"/abc", nil)
	e.must(404, owner, "GET", base+"/999999", nil)
	e.must(404, owner, "GET", fmt.Sprintf("/api/v1/buckets/shared/overrides/%d", o.ID), nil)
	e.must(428, owner, "PATCH", path, map[string]any{"max_permits": 2})
	r = e.must(200, owner, "PATCH", path, map[string]any{"max_permits": 200}, "If-Match", `"1"`)
	r.decode(t, &o)
	if o.Version != 2 || o.MaxPermits != 200 || o.Rate != "100/min" || r.header.Get("ETag") != `"2"` {
		t.Errorf("after PATCH: %+v", o)
	}
	e.must(412, owner, "PUT", path, map[string]any{"max_permits": 1, "rate": "1/s"}, "If-Match", `"1"`)
	b = e.must(422, owner, "PUT", path, map[string]any{"description": "only"}, "If-Match", "*").errorBody(t)
	if b.reasonFor("max_permits") == "" || b.reasonFor("rate") == "" {
		t.Errorf("PUT without limit: %+v", b.Error)
	}
	r = e.must(200, owner, "PUT", path, map[string]any{"match": "prefix", "key": "premium:", "max_permits": 9, "rate": "9/s"}, "If-Match", `"2"`)
	r.decode(t, &o)
	if o.Version != 3 || o.MaxPermits != 9 || o.Rate != "9/s" {
		t.Errorf("after PUT: %+v", o)
	}
	var shadowed map[string]any
	e.must(200, owner, "PATCH", path, map[string]any{"shadow": true}, "If-Match", `"3"`).decode(t, &shadowed)
	if shadowed["shadow"] != true || shadowed["version"] != float64(4) || shadowed["max_permits"] != float64(9) {
		t.Errorf("after PATCH shadow: %v", shadowed)
	}
	e.must(412, owner, "DELETE", path, nil, "If-Match", `"2"`)
	e.must(204, owner, "DELETE", path, nil, "If-Match", `"4"`)
	e.must(404, owner, "GET", path, nil)
	entries := e.auditEntries(audit.Filter{Action: "override.update"})
	if len(entries) != 3 {
		t.Errorf("%d override.update audit entries, want 3", len(entries))
	}
	var state map[string]any
	e.must(200, owner, "GET", "/api/v1/buckets/per-key/state", nil).decode(t, &state)
	if _, has := state["tokens"]; state["keyed"] != true || has || state["key_groups"] != float64(64) ||
		state["key_groups_in_sync"] != float64(0) || state["sync_status"] != "pending" {
		t.Errorf("state of a keyed bucket: %v", state)
	}
}

// nextCursorOf returns a cursor of another list, which the overrides list
// must refuse.
func nextCursorOf(t *testing.T, e *env, token string) string {
	t.Helper()
	e.bucket("c1", "alpha")
	e.bucket("c2", "alpha")
	var list bucketList
	e.must(200, token, "GET", "/api/v1/buckets?limit=1", nil).decode(t, &list)
	if list.NextCursor == "" {
		t.Fatal("no cursor")
	}
	return list.NextCursor
}

// The top keys and a key's state reach the client as documented.
func TestTopKeysAndKeyState(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.user("olivia")
	stranger := e.user("sam")
	e.app("alpha", "olivia")
	e.keyedBucket("per-key", "alpha")
	e.bucket("shared", "alpha")
	ctx := context.Background()
	hour := time.Now().Unix() / 3600
	if err := e.rdb.ZAdd(ctx, e.ks.DeniedKeys("per-key", hour), redis.Z{Score: 5, Member: "a"}, redis.Z{Score: 9, Member: "b"}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := e.rdb.ZAdd(ctx, e.ks.TakenKeys("per-key", hour-10), redis.Z{Score: 70, Member: "c"}).Err(); err != nil {
		t.Fatal(err)
	}
	type keyCount struct {
		Key   string `json:"key"`
		Count int64  `json:"count"`
	}
	var top struct {
		Window string     `json:"window"`
		Denied []keyCount `json:"denied"`
		Taken  []keyCount `json:"taken"`
	}
	e.must(200, owner, "GET", "/api/v1/buckets/per-key/top-keys", nil).decode(t, &top)
	if top.Window != "hour" || fmt.Sprint(top.Denied) != "[{b 9} {a 5}]" || len(top.Taken) != 0 {
		t.Fatalf("hour: %+v", top)
	}
	e.must(200, owner, "GET", "/api/v1/buckets/per-key/top-keys?window=day&limit=1", nil).decode(t, &top)
	if top.Window != "day" || fmt.Sprint(top.Denied) != "[{b 9}]" || fmt.Sprint(top.Taken) != "[{c 70}]" {
		t.Fatalf("day: %+v", top)
	}
	e.must(400, owner, "GET", "/api/v1/buckets/per-key/top-keys?window=week", nil)
	e.must(400, owner, "GET", "/api/v1/buckets/per-key/top-keys?limit=0", nil)
	e.must(422, owner, "GET", "/api/v1/buckets/shared/top-keys", nil)
	e.must(404, stranger, "GET", "/api/v1/buckets/per-key/top-keys", nil)

	e.must(201, owner, "POST", "/api/v1/buckets/per-key/overrides", map[string]any{"match": "prefix", "key": "vip:", "max_permits": 50, "rate": "5/s"})
	type keyState struct {
		Override *struct {
			Key string `json:"key"`
		} `json:"override"`
		MaxPermits int64      `json:"max_permits"`
		Rate       string     `json:"rate"`
		Tokens     float64    `json:"tokens"`
		FullAt     *time.Time `json:"full_at"`
		RedisTime  time.Time  `json:"redis_time"`
	}
	var ks keyState
	e.must(200, owner, "GET", "/api/v1/buckets/per-key/key-state?key="+url.QueryEscape("vip:1"), nil).decode(t, &ks)
	if ks.Override == nil || ks.Override.Key != "vip:" || ks.MaxPermits != 50 || ks.Tokens != 50 || ks.Rate != "5/s" || ks.FullAt != nil || ks.RedisTime.IsZero() {
		t.Fatalf("key vip:1: %+v", ks)
	}
	ks = keyState{}
	e.must(200, owner, "GET", "/api/v1/buckets/per-key/key-state?key=plain", nil).decode(t, &ks)
	if ks.Override != nil || ks.MaxPermits != 10 {
		t.Fatalf("key plain: %+v", ks)
	}
	e.must(400, owner, "GET", "/api/v1/buckets/per-key/key-state", nil)
	e.must(400, owner, "GET", "/api/v1/buckets/per-key/key-state?key="+strings.Repeat("k", 257), nil)
	e.must(404, stranger, "GET", "/api/v1/buckets/per-key/key-state?key=a", nil)
}
