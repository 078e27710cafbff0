package console

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/buckets"
)

// TestAuditDiffsShowWhatChanged: an update lists the fields a person
// changed (no version or timestamps), a creation only the fields given a
// value, and an override's entries name its key.
func TestAuditDiffsShowWhatChanged(t *testing.T) {
	e, ob, _ := bucketFixture(t)
	ctx := context.Background()
	b := e.bucket("shop-api", "alpha")
	b.MaxPermits = 25
	if err := e.bkts.Update(ctx, e.system, b); err != nil {
		t.Fatal(err)
	}
	e.keyedBucket("per-key", "alpha")
	rate, _ := buckets.ParseRate("5/s")
	o := &buckets.Override{Bucket: "per-key", Match: buckets.MatchExact, Key: "customer:42", MaxPermits: 5, Rate: rate}
	if err := e.bkts.CreateOverride(ctx, e.system, o); err != nil {
		t.Fatal(err)
	}
	o.MaxPermits = 7
	if err := e.bkts.UpdateOverride(ctx, e.system, o); err != nil {
		t.Fatal(err)
	}
	r := ob.get("/audit")
	wantStatus(t, "audit", r, http.StatusOK)
	rows := regexp.MustCompile(`(?s)<tr>\s*<td class="stack-head">.*?</tr>`).FindAllString(r.body, -1)
	find := func(action string) string {
		for _, row := range rows {
			if strings.Contains(row, ">"+action+"<") {
				return row
			}
		}
		t.Fatalf("no %s entry", action)
		return ""
	}
	changed := func(row string) []string {
		var out []string
		for _, m := range regexp.MustCompile(`<span class="field mono">([^<]*)</span>`).FindAllStringSubmatch(row, -1) {
			out = append(out, m[1])
		}
		return out
	}
	if got := changed(find("bucket.update")); strings.Join(got, ",") != "max_permits" {
		t.Errorf("the update lists %v, want max_permits only", got)
	}
	create := changed(find("bucket.create"))
	for _, f := range create {
		if f == "version" || f == "updated_at" || f == "shadow" || f == "lease_ms" {
			t.Errorf("the creation lists %s: %v", f, create)
		}
	}
	if len(create) == 0 || len(create) > 8 {
		t.Errorf("the creation lists %d fields: %v", len(create), create)
	}
	upd := find("override.update")
	if !strings.Contains(upd, `key <code class="mono">customer:42</code>`) || strings.Join(changed(upd), ",") != "max_permits" {
		t.Errorf("the override update does not name its key or lists more than its change: %v", changed(upd))
	}
}
