package api_test

import (
	"context"
	"fmt"
	"regexp"
	"testing"

	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/descriptors"
)

// TestStaleVersionOneAnswer changes a bucket, an override and a
// descriptor mapping with an If-Match one version behind: each answers 412
// "precondition_failed" with the same sentence, naming the object and both
// versions, and nothing changes. Mappings used to answer 409.
func TestStaleVersionOneAnswer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.user("olivia")
	e.app("alpha", "olivia")
	e.bucket("api", "alpha")
	ov := e.keyedBucket("keys", "alpha", "k1")["k1"]
	m := &descriptors.Mapping{App: "alpha", Domain: "edge", Entries: []descriptors.Entry{{Key: "generic_key"}}, Bucket: "api"}
	if err := descriptors.NewStore(e.db).Create(context.Background(), audit.Actor{User: "system"}, m); err != nil {
		t.Fatal(err)
	}
	sentence := regexp.MustCompile(`^(.+) was changed by someone else \(now version 2, your change was based on version 1\); nothing was saved: reload it and apply your change again$`)
	for _, tc := range []struct {
		path, object string
		body         map[string]any
	}{
		{"/api/v1/buckets/api", `bucket "api"`, map[string]any{"description": "x"}},
		{fmt.Sprintf("/api/v1/buckets/keys/overrides/%d", ov), fmt.Sprintf(`override %d of bucket "keys"`, ov), map[string]any{"description": "x"}},
		{fmt.Sprintf("/api/v1/apps/alpha/mappings/%d", m.ID), fmt.Sprintf("descriptor mapping %d", m.ID),
			map[string]any{"domain": "edge", "entries": []map[string]string{{"key": "generic_key"}}, "bucket": "api", "description": "x"}},
	} {
		method := "PATCH"
		if tc.object[:4] == "desc" {
			method = "PUT"
		}
		// Version 2 is saved; a change based on version 1 is stale.
		e.must(200, owner, method, tc.path, tc.body, "If-Match", `"1"`)
		tc.body["description"] = "y"
		for _, m := range []string{method, "DELETE"} {
			var body any = tc.body
			if m == "DELETE" {
				body = nil
			}
			b := e.must(412, owner, m, tc.path, body, "If-Match", `"1"`).errorBody(t)
			got := sentence.FindStringSubmatch(b.Error.Message)
			if b.Error.Code != "precondition_failed" || got == nil || got[1] != tc.object {
				t.Errorf("%s %s: %+v, want precondition_failed about %s", m, tc.path, b.Error, tc.object)
			}
		}
		var now struct {
			Version     int64  `json:"version"`
			Description string `json:"description"`
		}
		e.must(200, owner, "GET", tc.path, nil).decode(t, &now)
		if now.Version != 2 || now.Description != "x" {
			t.Errorf("%s after stale changes: %+v", tc.path, now)
		}
	}
}
