package api_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/audit"
)

type appJSON struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Version     int64  `json:"version"`
	CreatedBy   string `json:"created_by"`
}

func TestApps(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice := e.user("alice")
	bob := e.user("bob")

	t.Run("register", func(t *testing.T) {
		r := e.must(201, alice, "POST", "/api/v1/apps", map[string]string{"name": "payments", "description": "Card payments"})
		var a appJSON
		r.decode(t, &a)
		if a.Name != "payments" || a.Description != "Card payments" || a.Version != 1 || a.CreatedBy != "alice" {
			t.Errorf("created app = %+v", a)
		}
		if r.header.Get("Location") != "/api/v1/apps/payments" || r.header.Get("ETag") != `"1"` {
			t.Errorf("Location %q, ETag %q", r.header.Get("Location"), r.header.Get("ETag"))
		}
		entries := e.auditEntries(audit.Filter{Action: "app.create", ObjectName: "payments"})
		if len(entries) != 1 || entries[0].Actor != "alice (api token ci)" {
			t.Errorf("app.create audit rows: %+v", entries)
		}
	})
	t.Run("register validation", func(t *testing.T) {
		r := e.must(422, alice, "POST", "/api/v1/apps", map[string]string{"name": "Not Valid!", "description": strings.Repeat("x", 501)})
		b := r.errorBody(t)
		if b.Error.Code != "invalid" || b.reasonFor("name") == "" || b.reasonFor("description") == "" {
			t.Errorf("error = %+v", b.Error)
		}
	})
	t.Run("register malformed", func(t *testing.T) {
		for _, body := range []string{`{"name":"x","owner":"me"}`, `{"name":`, `["x"]`, `{"name": 7}`} {
			b := e.must(400, alice, "POST", "/api/v1/apps", body).errorBody(t)
			if b.Error.Code != "bad_request" {
				t.Errorf("%s: %+v", body, b.Error)
			}
		}
	})
	t.Run("register taken name", func(t *testing.T) {
		b := e.must(409, bob, "POST", "/api/v1/apps", map[string]string{"name": "payments"}).errorBody(t)
		if b.Error.Code != "conflict" || !strings.Contains(b.Error.Message, "payments") {
			t.Errorf("error = %+v", b.Error)
		}
	})
	t.Run("get", func(t *testing.T) {
		r := e.must(200, alice, "GET", "/api/v1/apps/payments", nil)
		var a appJSON
		r.decode(t, &a)
		if a.Name != "payments" || r.header.Get("ETag") != fmt.Sprintf(`"%d"`, a.Version) {
			t.Errorf("app %+v, ETag %q", a, r.header.Get("ETag"))
		}
		// A missing app and someone else's app read the same.
		missing := e.must(404, bob, "GET", "/api/v1/apps/nope", nil).errorBody(t)
		hidden := e.must(404, bob, "GET", "/api/v1/apps/payments", nil).errorBody(t)
		if missing.Error.Code != "not_found" || strings.Replace(hidden.Error.Message, "payments", "nope", 1) != missing.Error.Message {
			t.Errorf("missing %+v, hidden %+v", missing.Error, hidden.Error)
		}
		e.must(404, alice, "GET", "/api/v1/apps/INVALID", nil)
	})
	t.Run("list paginates", func(t *testing.T) {
		for i := range 5 {
			e.must(201, bob, "POST", "/api/v1/apps", map[string]string{"name": fmt.Sprintf("bob-%d", i)})
		}
		var got []string
		cursor := ""
		for pages := 0; ; pages++ {
			if pages > 5 {
				t.Fatal("pagination does not end")
			}
			var p struct {
				Apps       []appJSON `json:"apps"`
				NextCursor string    `json:"next_cursor"`
				Total      int       `json:"total"`
			}
			e.must(200, bob, "GET", "/api/v1/apps?limit=2&search=BOB-&cursor="+cursor, nil).decode(t, &p)
			if p.Total != 5 || len(p.Apps) > 2 {
				t.Fatalf("page: total %d, %d apps", p.Total, len(p.Apps))
			}
			for _, a := range p.Apps {
				got = append(got, a.Name)
			}
			if p.NextCursor == "" {
				break
			}
			cursor = p.NextCursor
		}
		if fmt.Sprint(got) != "[bob-0 bob-1 bob-2 bob-3 bob-4]" {
			t.Errorf("pages gave %v", got)
		}
		e.must(400, bob, "GET", "/api/v1/apps?limit=1000", nil)
		e.must(400, bob, "GET", "/api/v1/apps?cursor=garbage", nil)
	})
}

func TestMembers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.user("olivia")
	viewer := e.user("victor")
	e.user("walter")
	e.app("alpha", "olivia")

	type memberList struct {
		App     string `json:"app"`
		Members []struct {
			User string `json:"user"`
			Role string `json:"role"`
		} `json:"members"`
	}
	members := func() string {
		var l memberList
		e.must(200, owner, "GET", "/api/v1/apps/alpha/members", nil).decode(t, &l)
		var parts []string
		for _, m := range l.Members {
			parts = append(parts, m.User+":"+m.Role)
		}
		return strings.Join(parts, " ")
	}

	e.must(200, owner, "PUT", "/api/v1/apps/alpha/members/victor", map[string]string{"role": "viewer"})
	if got := members(); got != "olivia:owner victor:viewer" {
		t.Fatalf("members = %q", got)
	}
	// The viewer sees the members but cannot change them.
	e.must(200, viewer, "GET", "/api/v1/apps/alpha/members", nil)
	e.must(403, viewer, "PUT", "/api/v1/apps/alpha/members/walter", map[string]string{"role": "viewer"})
	e.must(403, viewer, "DELETE", "/api/v1/apps/alpha/members/olivia", nil)

	// The rules (roles, users, the last owner) are the application layer's
	// (internal/manage tests); here: how a refusal reaches the client.
	b := e.must(422, owner, "PUT", "/api/v1/apps/alpha/members/walter", map[string]string{"role": "admin"}).errorBody(t)
	if b.reasonFor("role") == "" {
		t.Errorf("bad role: %+v", b.Error)
	}
	e.must(400, owner, "PUT", "/api/v1/apps/alpha/members/walter", map[string]any{"role": "viewer", "admin": true})

	// Promote, then the last owner rule.
	e.must(200, owner, "PUT", "/api/v1/apps/alpha/members/victor", map[string]string{"role": "owner"})
	e.must(204, viewer, "DELETE", "/api/v1/apps/alpha/members/olivia", nil)
	b = e.must(409, viewer, "DELETE", "/api/v1/apps/alpha/members/victor", nil).errorBody(t)
	if b.Error.Code != "conflict" {
		t.Errorf("last owner: %+v", b.Error)
	}
	// olivia lost her role: the app is now invisible to her.
	e.must(404, owner, "GET", "/api/v1/apps/alpha/members", nil)
	b = e.must(404, viewer, "DELETE", "/api/v1/apps/alpha/members/walter", nil).errorBody(t)
	if !strings.Contains(b.Error.Message, "walter") {
		t.Errorf("revoking a non-member: %+v", b.Error)
	}

	grants := e.auditEntries(audit.Filter{App: "alpha", ObjectType: "member"})
	if len(grants) != 3 {
		t.Errorf("member audit rows = %d, want 3 (grant, grant, revoke)", len(grants))
	}
	for _, g := range grants {
		if !strings.HasSuffix(g.Actor, "(api token ci)") {
			t.Errorf("member change audited as %q", g.Actor)
		}
	}
}
