package apptokens_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apps"
	"github.com/sluicehq/sluice/internal/apptokens"
	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/descriptors"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/testenv"
)

var (
	ctx   = context.Background()
	alice = audit.Actor{User: "alice", Via: "test"}
)

func TestDigest(t *testing.T) {
	if apptokens.Digest("slc_personal") != "" || apptokens.Digest("") != "" ||
		apptokens.Digest(apptokens.Prefix+strings.Repeat("x", 500)) != "" {
		t.Fatal("text that cannot be a token must not be hashed")
	}
	a, b := apptokens.Digest(apptokens.Prefix+"a"), apptokens.Digest(apptokens.Prefix+"b")
	if len(a) != 64 || a == b || a != apptokens.Digest(apptokens.Prefix+"a") {
		t.Fatalf("digests %q %q", a, b)
	}
}

func TestStore(t *testing.T) {
	t.Parallel()
	db := testenv.MySQL(t)
	if err := apps.NewStore(db).Create(ctx, alice, &apps.App{Name: "edge"}); err != nil {
		t.Fatal(err)
	}
	s := apptokens.NewStore(db)
	mappings := descriptors.NewStore(db)
	rev0, _ := mappings.Revision(ctx)

	secret, tok, err := s.Create(ctx, alice, "edge", " envoy ", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(secret, apptokens.Prefix) || len(secret) < 40 || tok.Name != "envoy" ||
		tok.Scope != apptokens.ScopeAcquire || !strings.HasPrefix(secret, tok.Prefix) {
		t.Fatalf("created %q %+v", secret, tok)
	}
	var stored int
	if err := db.GetContext(ctx, &stored, `SELECT COUNT(*) FROM app_tokens WHERE token_hash = ?`, secret); err != nil || stored != 0 {
		t.Fatalf("the secret itself must not be stored: %d %v", stored, err)
	}
	var auditRow string
	if err := db.GetContext(ctx, &auditRow, `SELECT after_json FROM audit_log WHERE action = 'apptoken.create'`); err != nil ||
		strings.Contains(auditRow, secret) {
		t.Fatalf("audit row %q %v", auditRow, err)
	}
	if rev, _ := mappings.Revision(ctx); rev != rev0+1 {
		t.Fatalf("revision %d after a token, want %d", rev, rev0+1)
	}

	if _, _, err := s.Create(ctx, alice, "edge", "envoy", nil); !errors.Is(err, errs.ErrConflict) {
		t.Fatalf("same name: %v", err)
	}
	past := time.Now().Add(-time.Hour)
	for _, tc := range []struct {
		app, name string
		exp       *time.Time
		field     string
	}{{"ghost", "x", nil, "app"}, {"edge", " ", nil, "name"}, {"edge", "x", &past, "expires_at"}} {
		_, _, err := s.Create(ctx, alice, tc.app, tc.name, tc.exp)
		if v := errs.Fields(err); v == nil || v.For(tc.field) == "" {
			t.Fatalf("create %+v: %v, want a field error on %s", tc, err, tc.field)
		}
	}
	soon := time.Now().Add(time.Hour)
	secret2, tok2, err := s.Create(ctx, alice, "edge", "nginx", &soon)
	if err != nil {
		t.Fatal(err)
	}

	active, err := s.Active(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c1, c2 := active[apptokens.Digest(secret)], active[apptokens.Digest(secret2)]
	if len(active) != 2 || c1.App != "edge" || c1.TokenID != tok.ID || c2.ExpiresAt == nil {
		t.Fatalf("active %+v", active)
	}

	if err := s.Revoke(ctx, alice, "other", tok.ID); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("revoke through another app: %v", err)
	}
	if err := s.Revoke(ctx, alice, "edge", tok.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.Revoke(ctx, alice, "edge", tok.ID); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("revoke twice: %v", err)
	}
	active, _ = s.Active(ctx)
	if _, ok := active[apptokens.Digest(secret)]; ok || len(active) != 1 {
		t.Fatalf("revoked token still active: %+v", active)
	}
	list, err := s.List(ctx, "edge")
	if err != nil || len(list) != 2 || list[0].ID != tok2.ID || list[1].RevokedAt == nil || list[1].Active(time.Now()) {
		t.Fatalf("list %+v %v", list, err)
	}
	if _, _, err := s.Create(ctx, alice, "edge", "envoy", nil); err != nil {
		t.Fatalf("a revoked token's name is free again: %v", err)
	}
	if rev, _ := mappings.Revision(ctx); rev != rev0+4 {
		t.Fatalf("revision %d, want %d", rev, rev0+4)
	}
}
