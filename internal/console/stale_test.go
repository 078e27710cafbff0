package console

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"testing"

	"github.com/sluicehq/sluice/internal/descriptors"
)

// staleBannerRe is the one banner of a change refused for a stale
// version, and its sentence.
var staleBannerRe = regexp.MustCompile(`<div class="alert alert-warn" role="alert" id="stale">\s*<p class="stale-message">([^<]*)</p>`)

// TestStaleBannerIsOne: every change the console refuses because it was
// based on an older version answers 412 and shows the same banner (the
// "stale" partial, one element) with the refusal's own sentence, made by
// the object's CheckVersion: the edits of a bucket and of an override
// (with the newer values and the form kept), and the deletes of a bucket,
// an override and a descriptor mapping (the console has no edit form for
// mappings: they are added and deleted).
func TestStaleBannerIsOne(t *testing.T) {
	e, ob, _ := bucketFixture(t)
	ctx := context.Background()
	e.bucket("shop", "alpha", "alpha")
	e.keyedBucket("per-key", "alpha")
	o := e.newOverride("per-key", "tenant:1")
	m := &descriptors.Mapping{App: "alpha", Domain: "edge", Entries: []descriptors.Entry{{Key: "generic_key"}}, Bucket: "shop"}
	mappings := descriptors.NewStore(e.db)
	if err := mappings.Create(ctx, e.system, m); err != nil {
		t.Fatal(err)
	}

	// Someone saves version 2 of each, with a value the edit banners show.
	b, err := e.bkts.Get(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	b.MaxPermits = 77
	if err := e.bkts.Update(ctx, e.system, b); err != nil {
		t.Fatal(err)
	}
	o.MaxPermits = 66
	if err := e.bkts.UpdateOverride(ctx, e.system, o); err != nil {
		t.Fatal(err)
	}
	m.Description = "changed meanwhile"
	if err := mappings.Update(ctx, e.system, m); err != nil {
		t.Fatal(err)
	}
	b, _ = e.bkts.Get(ctx, "shop")
	o, _ = e.bkts.GetOverride(ctx, "per-key", o.ID)
	m, _ = mappings.Get(ctx, m.ID)
	if b.Version != 2 || o.Version != 2 || m.Version != 2 {
		t.Fatalf("versions %d %d %d, want 2", b.Version, o.Version, m.Version)
	}
	sentence := map[string]string{
		"bucket": b.CheckVersion(1).Error(), "override": o.CheckVersion(1).Error(), "mapping": m.CheckVersion(1).Error(),
	}
	ov := strconv.FormatInt(o.ID, 10)
	for _, c := range []struct {
		what, object, path string
		form               url.Values
		also               []string // the newer values and the kept form of an edit
	}{
		{"bucket edit", "bucket", "/buckets/shop", url.Values{"max_permits": {"7"}, "rate": {"1/s"}, "allowed_apps": {"alpha"}, "version": {"1"}},
			[]string{"<dd>77</dd>", "<dt>Allowed apps</dt>", `value="7"`, `name="version" value="2"`, "discard your changes"}},
		{"override edit", "override", "/buckets/per-key/overrides/" + ov + "/edit", url.Values{"max_permits": {"6"}, "rate": {"6/min"}, "version": {"1"}},
			[]string{"<dd>66</dd>", "<dt>Shadow mode</dt><dd>off</dd>", `value="6"`, `name="version" value="2"`, "discard your changes"}},
		{"bucket delete", "bucket", "/buckets/shop/delete", url.Values{"version": {"1"}}, []string{`name="version" value="2"`}},
		{"override delete", "override", "/buckets/per-key/overrides/" + ov + "/delete", url.Values{"version": {"1"}}, []string{`name="version" value="2"`}},
		{"mapping delete", "mapping", "/apps/alpha/mappings/" + strconv.FormatInt(m.ID, 10) + "/delete", url.Values{"version": {"1"}},
			[]string{`name="version" value="2"`}},
	} {
		r := ob.post(c.path, c.form)
		wantStatus(t, c.what, r, http.StatusPreconditionFailed)
		found := staleBannerRe.FindAllStringSubmatch(r.body, -1)
		if len(found) != 1 {
			t.Errorf("%s: %d stale banners, want 1", c.what, len(found))
			continue
		}
		if got := html.UnescapeString(found[0][1]); got != sentence[c.object] {
			t.Errorf("%s: banner says %q, want %q", c.what, got, sentence[c.object])
		}
		wantBody(t, c.what, r, c.also...)
	}
	// Nothing was written by the refused changes.
	if cur, _ := e.bkts.Get(ctx, "shop"); cur == nil || cur.Version != 2 || cur.MaxPermits != 77 {
		t.Fatalf("bucket after the stale changes: %+v", cur)
	}
	if cur, _ := e.bkts.GetOverride(ctx, "per-key", o.ID); cur == nil || cur.Version != 2 || cur.MaxPermits != 66 {
		t.Fatalf("override after the stale changes: %+v", cur)
	}
	if cur, err := mappings.Get(ctx, m.ID); err != nil || cur.Version != 2 {
		t.Fatalf("mapping after the stale delete: %+v %v", cur, err)
	}
}
