package manage_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/descriptors"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/manage"
)

func TestMappingsOwnersWriteViewersReadOthersSeeNothing(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	olga, vic, eve, root := f.user("olga", false), f.user("vic", false), f.user("eve", false), f.user("root", true)
	f.app(olga, "alpha")
	if _, err := f.svc.GrantRole(ctx, olga, manage.GrantRole{App: "alpha", User: "vic", Role: "viewer"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.CreateBucket(ctx, olga, manage.CreateBucket{Fields: bucketFields("checkout", "alpha", 10, "1/s")}); err != nil {
		t.Fatal(err)
	}
	req := manage.SaveMapping{App: "alpha", Domain: "edge", Entries: []descriptors.Entry{{Key: "generic_key", Value: "checkout"}}, Bucket: "checkout"}

	_, err := f.svc.CreateMapping(ctx, vic, req)
	if !errors.Is(err, errs.ErrForbidden) {
		t.Fatalf("viewer creates a mapping: %v", err)
	}
	if msg, _ := errs.PublicMessage(err); msg != `mapping descriptors of app "alpha" needs its owner role` {
		t.Errorf("viewer creates a mapping: message %q", msg)
	}
	if _, err := f.svc.CreateMapping(ctx, eve, req); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("stranger creates a mapping: %v", err)
	}
	bad := req
	bad.Bucket = "Bad Name"
	var v *errs.Validation
	if _, err := f.svc.CreateMapping(ctx, olga, bad); !errors.As(err, &v) {
		t.Fatalf("invalid mapping: %v", err)
	}
	m, err := f.svc.CreateMapping(ctx, olga, req)
	if err != nil {
		t.Fatal(err)
	}
	if m.ID == 0 || m.Version != 1 || m.CreatedBy != "olga" {
		t.Fatalf("created %+v", m)
	}
	if ms, err := f.svc.Mappings(ctx, vic, "alpha"); err != nil || len(ms) != 1 || ms[0].Bucket != "checkout" {
		t.Fatalf("viewer lists %v, %v", ms, err)
	}
	if _, err := f.svc.Mappings(ctx, eve, "alpha"); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("stranger lists: %v", err)
	}

	upd := req
	upd.ID, upd.Version, upd.Description = m.ID, 1, "checkout at the edge"
	if _, err := f.svc.UpdateMapping(ctx, vic, upd); !errors.Is(err, errs.ErrForbidden) {
		t.Fatalf("viewer updates: %v", err)
	}
	got, err := f.svc.UpdateMapping(ctx, root, upd)
	if err != nil || got.Version != 2 || got.Description != "checkout at the edge" {
		t.Fatalf("admin updates: %+v, %v", got, err)
	}
	if _, err := f.svc.UpdateMapping(ctx, olga, upd); !errors.Is(err, errs.ErrConflict) {
		t.Fatalf("stale update: %v", err)
	}
	if err := f.svc.DeleteMapping(ctx, olga, manage.DeleteMapping{App: "alpha", ID: m.ID, Version: 1}); !errors.Is(err, errs.ErrConflict) {
		t.Fatalf("stale delete: %v", err)
	}
	if err := f.svc.DeleteMapping(ctx, vic, manage.DeleteMapping{App: "alpha", ID: m.ID, Version: 2}); !errors.Is(err, errs.ErrForbidden) {
		t.Fatalf("viewer deletes: %v", err)
	}
	// A mapping is reached only through its own app.
	f.app(olga, "beta")
	if err := f.svc.DeleteMapping(ctx, olga, manage.DeleteMapping{App: "beta", ID: m.ID, Version: 2}); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("delete through another app: %v", err)
	}
	if err := f.svc.DeleteMapping(ctx, olga, manage.DeleteMapping{App: "alpha", ID: m.ID, Version: 2}); err != nil {
		t.Fatal(err)
	}
	if ms, err := f.svc.Mappings(ctx, olga, "alpha"); err != nil || len(ms) != 0 {
		t.Fatalf("after delete: %v, %v", ms, err)
	}
	for _, a := range []string{"mapping.create", "mapping.update", "mapping.delete"} {
		if e := f.entries(a); len(e) != 1 {
			t.Errorf("%s audited %d times", a, len(e))
		}
	}
	if n := len(f.entries("access.denied")); n < 5 {
		t.Errorf("%d refusals audited, want at least 5", n)
	}
}

func TestAppTokensAreForOwnersOnly(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	olga, vic, eve := f.user("olga", false), f.user("vic", false), f.user("eve", false)
	f.app(olga, "alpha")
	if _, err := f.svc.GrantRole(ctx, olga, manage.GrantRole{App: "alpha", User: "vic", Role: "viewer"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.svc.CreateAppToken(ctx, vic, manage.CreateAppToken{App: "alpha", Name: "edge"}); !errors.Is(err, errs.ErrForbidden) {
		t.Fatalf("viewer creates a token: %v", err)
	}
	if _, err := f.svc.AppTokens(ctx, vic, "alpha"); !errors.Is(err, errs.ErrForbidden) {
		t.Fatalf("viewer lists tokens: %v", err)
	}
	if _, err := f.svc.AppTokens(ctx, eve, "alpha"); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("stranger lists tokens: %v", err)
	}
	var v *errs.Validation
	if _, _, err := f.svc.CreateAppToken(ctx, olga, manage.CreateAppToken{App: "alpha", Name: ""}); !errors.As(err, &v) {
		t.Fatalf("empty name: %v", err)
	}
	secret, tok, err := f.svc.CreateAppToken(ctx, olga, manage.CreateAppToken{App: "alpha", Name: "edge"})
	if err != nil || !strings.HasPrefix(secret, "sla_") || tok.App != "alpha" {
		t.Fatalf("create: %q %+v %v", secret, tok, err)
	}
	ts, err := f.svc.AppTokens(ctx, olga, "alpha")
	if err != nil || len(ts) != 1 || ts[0].ID != tok.ID || strings.Contains(ts[0].Prefix, secret) {
		t.Fatalf("list: %+v, %v", ts, err)
	}
	if err := f.svc.RevokeAppToken(ctx, vic, "alpha", tok.ID); !errors.Is(err, errs.ErrForbidden) {
		t.Fatalf("viewer revokes: %v", err)
	}
	if err := f.svc.RevokeAppToken(ctx, olga, "alpha", tok.ID); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.RevokeAppToken(ctx, olga, "alpha", tok.ID); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("second revoke: %v", err)
	}
	if ts, _ := f.svc.AppTokens(ctx, olga, "alpha"); len(ts) != 1 || ts[0].RevokedAt == nil {
		t.Fatalf("revoked token listed as %+v", ts)
	}
}
