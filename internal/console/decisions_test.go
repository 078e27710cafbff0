package console

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apptokens"
	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/descriptors"
	"github.com/sluicehq/sluice/internal/rbac"
)

func TestAppPageMappingsAndTokens(t *testing.T) {
	e := newEnv(t)
	olga, vic := e.user("olga", false), e.user("vic", false)
	e.app("alpha", "olga")
	e.grant("vic", "alpha", rbac.RoleViewer)
	e.bucket("checkout", "alpha")
	b := e.browser()
	b.signIn(olga)

	// A bad mapping comes back with the errors next to the fields.
	r := b.post("/apps/alpha/mappings", url.Values{"domain": {"edge"}, "entries": {""}, "bucket": {"nope"}})
	wantStatus(t, "bad mapping", r, http.StatusUnprocessableEntity)
	wantBody(t, "bad mapping", r, `id="entries-error"`, `value="edge"`)

	r = b.post("/apps/alpha/mappings", url.Values{"domain": {"edge"}, "entries": {"generic_key=checkout\nremote_address"},
		"bucket": {"checkout"}, "key_from": {""}})
	wantStatus(t, "add mapping", r, http.StatusSeeOther)
	ms, err := descriptors.NewStore(e.db).List(context.Background(), "alpha")
	if err != nil || len(ms) != 1 || len(ms[0].Entries) != 2 || ms[0].Entries[1] != (descriptors.Entry{Key: "remote_address"}) {
		t.Fatalf("stored mappings %+v, %v", ms, err)
	}
	r = b.get("/apps/alpha")
	wantBody(t, "app page", r, "Descriptor mappings", "generic_key=checkout", `/apps/alpha/mappings/`+itoa(ms[0].ID)+`/delete`, "App tokens")
	if strings.Contains(r.body, "<script>") {
		t.Fatal("inline script on the app page")
	}

	// A viewer sees the mappings, not the forms nor the tokens.
	vb := e.browser()
	vb.signIn(vic)
	r = vb.get("/apps/alpha")
	wantBody(t, "viewer's app page", r, "generic_key=checkout")
	if strings.Contains(r.body, "Add mapping") || strings.Contains(r.body, "App tokens") {
		t.Fatal("a viewer is offered owner actions")
	}

	// Delete: a confirmation page, then the delete.
	r = b.get("/apps/alpha/mappings/" + itoa(ms[0].ID) + "/delete")
	wantStatus(t, "confirm delete", r, http.StatusOK)
	wantBody(t, "confirm delete", r, "Delete this descriptor mapping?", `name="version" value="1"`)
	// Changed meanwhile: the delete of version 1 is refused with the
	// banner every stale delete shows, and the page asks again about
	// version 2.
	m := ms[0]
	m.Description = "changed meanwhile"
	if err := descriptors.NewStore(e.db).Update(context.Background(), e.system, m); err != nil {
		t.Fatal(err)
	}
	r = b.post("/apps/alpha/mappings/"+itoa(m.ID)+"/delete", url.Values{"version": {"1"}})
	wantStatus(t, "stale delete", r, http.StatusPreconditionFailed)
	wantBody(t, "stale delete", r, `id="stale"`, "descriptor mapping "+itoa(m.ID)+" was changed by someone else (now version 2, your change was based on version 1)",
		`name="version" value="2"`)
	wantStatus(t, "delete", b.post("/apps/alpha/mappings/"+itoa(ms[0].ID)+"/delete", url.Values{"version": {"2"}}), http.StatusSeeOther)
	if ms, _ := descriptors.NewStore(e.db).List(context.Background(), "alpha"); len(ms) != 0 {
		t.Fatalf("mapping not deleted: %+v", ms)
	}

	// A token's secret is shown once.
	r = b.post("/apps/alpha/tokens", url.Values{"name": {""}})
	wantStatus(t, "unnamed app token", r, http.StatusUnprocessableEntity)
	wantBody(t, "unnamed app token", r, `id="name-error"`)
	r = b.post("/apps/alpha/tokens", url.Values{"name": {"gateway"}})
	wantStatus(t, "create app token", r, http.StatusOK)
	secret := regexp.MustCompile(`sla_[A-Za-z0-9_-]+`).FindString(r.body)
	if secret == "" {
		t.Fatalf("new app token not shown\n%s", excerpt(r.body))
	}
	if r.header.Get("Cache-Control") != "no-store" {
		t.Fatal("the page with a secret may be cached")
	}
	r = b.get("/apps/alpha")
	wantBody(t, "token listed", r, "gateway")
	if strings.Contains(r.body, secret) {
		t.Fatal("the secret is shown again")
	}
	ts, _ := apptokens.NewStore(e.db).List(context.Background(), "alpha")
	if len(ts) != 1 {
		t.Fatalf("%d tokens", len(ts))
	}
	wantBody(t, "confirm revoke", b.get("/apps/alpha/tokens/"+itoa(ts[0].ID)+"/revoke"), "Revoke token gateway?")
	wantStatus(t, "revoke", b.post("/apps/alpha/tokens/"+itoa(ts[0].ID)+"/revoke", nil), http.StatusSeeOther)
	if ts, _ := apptokens.NewStore(e.db).List(context.Background(), "alpha"); ts[0].RevokedAt == nil {
		t.Fatal("token not revoked")
	}
}

// An app token past its expiry is listed as expired, not active.
func TestAppPageShowsExpiredAppTokens(t *testing.T) {
	e := newEnv(t)
	olga := e.user("olga", false)
	e.app("alpha", "olga")
	store := apptokens.NewStore(e.db)
	soon := time.Now().Add(time.Hour)
	for _, name := range []string{"lapsed", "current"} {
		if _, _, err := store.Create(context.Background(), audit.Actor{User: "olga", Via: "test"}, "alpha", name, &soon); err != nil {
			t.Fatal(err)
		}
	}
	// Expire one, as time would.
	if _, err := e.db.Exec(`UPDATE app_tokens SET expires_at = ? WHERE name = 'lapsed'`, time.Now().Add(-time.Minute).UTC()); err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.signIn(olga)
	r := b.get("/apps/alpha")
	row := func(name string) string {
		m := regexp.MustCompile(`(?s)<strong>` + name + `</strong>.*?</tr>`).FindString(r.body)
		if m == "" {
			t.Fatalf("token %s not listed\n%s", name, excerpt(r.body))
		}
		return m
	}
	if lapsed := row("lapsed"); !strings.Contains(lapsed, ">expired<") || strings.Contains(lapsed, ">active<") {
		t.Fatalf("expired token listed as %s", lapsed)
	}
	if current := row("current"); !strings.Contains(current, ">active<") {
		t.Fatalf("current token listed as %s", current)
	}
}
