package manage_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/accounts"
	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/manage"
	"github.com/sluicehq/sluice/internal/rbac"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/testenv"
)

// fixture is a Service on a fresh database and a private Redis key space,
// with the stores behind it for arranging and checking.
type fixture struct {
	t       *testing.T
	svc     *manage.Service
	acc     *accounts.Store
	enf     *rbac.Enforcer
	buckets *buckets.Store
	audit   *audit.Store
	rdb     *redis.Client
	ks      redisscript.Keyspace
}

var system = audit.Actor{User: "system", Via: "test"}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	db := testenv.MySQL(t)
	rdb, prefix := testenv.Redis(t)
	enf, err := rbac.New(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	acc := accounts.NewStore(db)
	acc.Hash = accounts.HashParams{Time: 1, Memory: 64, Threads: 1}
	ks := redisscript.Keyspace{Prefix: prefix + "b:"}
	svc, err := manage.New(manage.Config{DB: db, Enforcer: enf, Redis: rdb, Keyspace: ks, Accounts: acc, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	return &fixture{t: t, svc: svc, acc: acc, enf: enf, buckets: buckets.NewStore(db), audit: audit.NewStore(db),
		rdb: rdb, ks: ks}
}

// user creates an account and returns it as a caller, optionally an admin.
func (f *fixture) user(name string, admin bool) manage.Caller {
	f.t.Helper()
	u, err := f.acc.CreateUser(context.Background(), system, name, "correct horse battery")
	if err != nil {
		f.t.Fatal(err)
	}
	if admin {
		if err := f.enf.SetAdmin(context.Background(), system, name, true); err != nil {
			f.t.Fatal(err)
		}
	}
	return manage.Caller{User: u, Addr: "192.0.2.1", Request: "TEST " + name}
}

func (f *fixture) app(c manage.Caller, name string) {
	f.t.Helper()
	if _, err := f.svc.CreateApp(context.Background(), c, manage.CreateApp{Name: name}); err != nil {
		f.t.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }

func bucketFields(name, owner string, capacity int64, rate string) manage.BucketPatch {
	return manage.BucketPatch{Name: &name, OwnerApp: &owner, MaxPermits: &capacity, Rate: &rate}
}

// entries returns the audit entries with action, newest first.
func (f *fixture) entries(action string) []audit.Entry {
	f.t.Helper()
	p, err := f.audit.List(context.Background(), audit.Filter{Action: action, Limit: 500})
	if err != nil {
		f.t.Fatal(err)
	}
	return p.Entries
}

func TestCreateAppMakesTheCreatorOwner(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	olga := f.user("olga", false)
	f.app(olga, "alpha")
	m, err := f.svc.Members(ctx, olga, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Members) != 1 || m.Members[0].User != "olga" || m.Role != rbac.RoleOwner || !m.CanManage {
		t.Fatalf("members %+v", m)
	}
	_, err = f.svc.CreateApp(ctx, olga, manage.CreateApp{Name: "alpha"})
	if !errors.Is(err, errs.ErrConflict) {
		t.Fatalf("duplicate app: %v, want a conflict", err)
	}
	if msg, _ := errs.PublicMessage(err); !strings.Contains(msg, "already exists") {
		t.Errorf("conflict message %q", msg)
	}
	if _, err := f.svc.CreateApp(ctx, manage.Caller{}, manage.CreateApp{Name: "beta"}); !errors.Is(err, errs.ErrUnauthenticated) {
		t.Fatalf("anonymous create: %v", err)
	}
}

func TestRolesNeedTheOwnerRoleAndKeepTheLastOwner(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	olga, vic, oscar := f.user("olga", false), f.user("vic", false), f.user("oscar", false)
	f.app(olga, "alpha")
	if _, err := f.svc.GrantRole(ctx, olga, manage.GrantRole{App: "alpha", User: "vic", Role: "viewer"}); err != nil {
		t.Fatal(err)
	}
	// A viewer sees the app but may not manage it: 403, audited.
	_, err := f.svc.GrantRole(ctx, vic, manage.GrantRole{App: "alpha", User: "oscar", Role: "owner"})
	if !errors.Is(err, errs.ErrForbidden) {
		t.Fatalf("viewer grant: %v, want forbidden", err)
	}
	// A stranger does not even see it: 404, like a missing app, audited.
	if _, err := f.svc.App(ctx, oscar, "alpha"); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("stranger reads app: %v, want not found", err)
	}
	if n := len(f.entries("access.denied")); n != 2 {
		t.Errorf("%d denied accesses audited, want 2", n)
	}
	if _, err := f.svc.GrantRole(ctx, olga, manage.GrantRole{App: "alpha", User: "vic", Role: "boss"}); errs.Fields(err).For("role") == "" {
		t.Errorf("bad role: %v, want a field error on role", err)
	}
	if err := f.svc.RevokeRole(ctx, olga, manage.RevokeRole{App: "alpha", User: "olga"}); !errors.Is(err, errs.ErrConflict) {
		t.Errorf("revoking the last owner: %v, want a conflict", err)
	}
	var noRole *manage.NoRoleError
	if err := f.svc.RevokeRole(ctx, olga, manage.RevokeRole{App: "alpha", User: "oscar"}); !errors.As(err, &noRole) {
		t.Errorf("revoking a role nobody holds: %v", err)
	}
	if err := f.svc.RevokeRole(ctx, olga, manage.RevokeRole{App: "alpha", User: "vic"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.App(ctx, vic, "alpha"); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("revoked viewer still sees the app: %v", err)
	}
}

func TestCreateBucketValidatesThenChecksTheOwnerRole(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	olga, vic := f.user("olga", false), f.user("vic", false)
	f.app(olga, "alpha")
	// Every problem is reported at once, the transport's first.
	p := bucketFields("Bad Name", "alpha", 0, "fast")
	p.MaxPermits = nil
	p.Problems.Add("max_permits", "must be a whole number from 1 to 1000000000")
	_, err := f.svc.CreateBucket(ctx, olga, manage.CreateBucket{Fields: p})
	v := errs.Fields(err)
	if v == nil || v.For("name") == "" || v.For("rate") == "" || v.For("max_permits") == "" || len(v.Fields) != 3 {
		t.Fatalf("validation %v, want name, rate and max_permits once each", err)
	}
	_, err = f.svc.CreateBucket(ctx, vic, manage.CreateBucket{Fields: bucketFields("alpha-api", "alpha", 10, "1/s")})
	if !errors.Is(err, errs.ErrForbidden) {
		t.Fatalf("create by a stranger: %v, want forbidden", err)
	}
	b, err := f.svc.CreateBucket(ctx, olga, manage.CreateBucket{Fields: bucketFields("alpha-api", "alpha", 10, "100 per minute")})
	if err != nil {
		t.Fatal(err)
	}
	if b.Version != 1 || b.Rate.String() != "100/min" || len(b.AllowedApps) != 1 || b.AllowedApps[0] != "alpha" {
		t.Fatalf("created %+v", b)
	}
	events, err := f.buckets.PendingEvents(ctx, 10)
	if err != nil || len(events) != 1 {
		t.Fatalf("events %v %v, want the create's", events, err)
	}
	if e := f.entries("bucket.create"); len(e) != 1 || e[0].Actor != "olga" || e[0].RemoteAddr != "192.0.2.1" {
		t.Fatalf("audit %+v", e)
	}
}

func TestUpdateBucketSkipsNoOpsAndRefusesStaleVersions(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	olga := f.user("olga", false)
	f.app(olga, "alpha")
	b, err := f.svc.CreateBucket(ctx, olga, manage.CreateBucket{Fields: bucketFields("alpha-api", "alpha", 10, "1/s")})
	if err != nil {
		t.Fatal(err)
	}
	before, _ := f.buckets.PendingEvents(ctx, 10)

	// The same values, written differently: nothing is saved.
	ch, err := f.svc.UpdateBucket(ctx, olga, manage.UpdateBucket{Name: b.Name, Version: 1,
		Fields: manage.BucketPatch{Rate: ptr("1 per second"), AllowedApps: &[]string{"alpha", "alpha"}}})
	if err != nil || ch.Changed || ch.Bucket.Version != 1 {
		t.Fatalf("no-op update: %+v %v", ch, err)
	}
	if after, _ := f.buckets.PendingEvents(ctx, 10); len(after) != len(before) {
		t.Fatalf("a no-op update sent an event")
	}
	if n := len(f.entries("bucket.update")); n != 0 {
		t.Fatalf("a no-op update was audited %d times", n)
	}

	ch, err = f.svc.UpdateBucket(ctx, olga, manage.UpdateBucket{Name: b.Name, Version: 1,
		Fields: manage.BucketPatch{MaxPermits: ptr(int64(20))}})
	if err != nil || !ch.Changed || ch.Bucket.Version != 2 || ch.Bucket.MaxPermits != 20 || ch.Bucket.Rate.String() != "1/s" {
		t.Fatalf("patch: %+v %v", ch.Bucket, err)
	}
	var stale *manage.StaleError
	_, err = f.svc.UpdateBucket(ctx, olga, manage.UpdateBucket{Name: b.Name, Version: 1,
		Fields: manage.BucketPatch{MaxPermits: ptr(int64(30))}})
	if !errors.As(err, &stale) || stale.Current.Version != 2 || !errors.Is(err, errs.ErrConflict) {
		t.Fatalf("stale update: %v", err)
	}
	// Replace resets what is not given: capacity and rate are required.
	_, err = f.svc.UpdateBucket(ctx, olga, manage.UpdateBucket{Name: b.Name, Replace: true,
		Fields: manage.BucketPatch{Description: ptr("x")}})
	if v := errs.Fields(err); v.For("max_permits") == "" || v.For("rate") == "" {
		t.Fatalf("replace without capacity and rate: %v", err)
	}
	_, err = f.svc.UpdateBucket(ctx, olga, manage.UpdateBucket{Name: b.Name, Fields: manage.BucketPatch{Name: ptr("other")}})
	if errs.Fields(err).For("name") == "" {
		t.Fatalf("rename: %v, want a field error on name", err)
	}
	_, err = f.svc.UpdateBucket(ctx, olga, manage.UpdateBucket{Name: b.Name, Fields: manage.BucketPatch{OwnerApp: ptr("beta")}})
	if errs.Fields(err).For("owner_app") == "" {
		t.Fatalf("moving to another app: %v, want a field error on owner_app", err)
	}
	if err := f.svc.DeleteBucket(ctx, olga, manage.DeleteBucket{Name: b.Name, Version: 1}); !errors.As(err, &stale) {
		t.Fatalf("stale delete: %v", err)
	}
	if err := f.svc.DeleteBucket(ctx, olga, manage.DeleteBucket{Name: b.Name, Version: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Bucket(ctx, olga, b.Name); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("deleted bucket: %v", err)
	}
}

func TestBucketVisibility(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	olga, oscar, root := f.user("olga", false), f.user("oscar", false), f.user("root", true)
	f.app(olga, "alpha")
	f.app(oscar, "beta")
	shared := bucketFields("beta-shared", "beta", 5, "1/s")
	shared.AllowedApps = &[]string{"alpha", "beta"}
	if _, err := f.svc.CreateBucket(ctx, oscar, manage.CreateBucket{Fields: shared}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.CreateBucket(ctx, oscar, manage.CreateBucket{Fields: bucketFields("beta-own", "beta", 5, "1/s")}); err != nil {
		t.Fatal(err)
	}
	// An allowed app's member sees the bucket but may not change it.
	v, err := f.svc.Bucket(ctx, olga, "beta-shared")
	if err != nil || v.CanEdit {
		t.Fatalf("allowed app member: %+v %v", v, err)
	}
	if _, err := f.svc.EditableBucket(ctx, olga, "beta-shared"); !errors.Is(err, errs.ErrForbidden) {
		t.Fatalf("edit by an allowed app member: %v", err)
	}
	if _, err := f.svc.Bucket(ctx, olga, "beta-own"); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("invisible bucket: %v", err)
	}
	page, err := f.svc.ListBuckets(ctx, olga, manage.BucketQuery{})
	if err != nil || page.Total != 1 || page.Buckets[0].Name != "beta-shared" {
		t.Fatalf("olga's list: %+v %v", page, err)
	}
	if page, _ := f.svc.ListBuckets(ctx, root, manage.BucketQuery{}); page.Total != 2 {
		t.Fatalf("admin sees %d buckets", page.Total)
	}
	stranger := f.user("nobody", false)
	if page, _ := f.svc.ListBuckets(ctx, stranger, manage.BucketQuery{}); page.Total != 0 {
		t.Fatalf("a member of nothing sees %d buckets", page.Total)
	}
	if _, err := f.svc.BucketDraft(ctx, stranger); !errors.Is(err, errs.ErrForbidden) {
		t.Fatalf("a member of nothing may draft a bucket: %v", err)
	}
	au, err := f.svc.ListAudit(ctx, olga, manage.AuditQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range au.Entries {
		if e.App == "beta" && e.ObjectName == "beta-own" {
			t.Fatalf("olga reads an audit entry of an invisible bucket: %+v", e)
		}
	}
}

func TestBucketStateComparesVersions(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	olga := f.user("olga", false)
	f.app(olga, "alpha")
	b, err := f.svc.CreateBucket(ctx, olga, manage.CreateBucket{Fields: bucketFields("alpha-api", "alpha", 10, "1/s")})
	if err != nil {
		t.Fatal(err)
	}
	_, st, err := f.svc.BucketState(ctx, olga, b.Name)
	if err != nil || st.InRedis || st.Sync != manage.Pending {
		t.Fatalf("before sync: %+v %v", st, err)
	}
	apply := func(version int64) {
		cfg := redisscript.Config{Name: b.Name, ID: b.ID, Version: version, Capacity: 10, PermitsMicro: 1_000_000,
			PeriodSeconds: 1, Apps: []string{"alpha"}}
		if _, err := redisscript.Apply(ctx, f.rdb, f.ks, cfg, false); err != nil {
			t.Fatal(err)
		}
	}
	apply(1)
	if _, st, _ = f.svc.BucketState(ctx, olga, b.Name); !st.InRedis || st.Sync != manage.InSync || st.Tokens != 10 {
		t.Fatalf("synced: %+v", st)
	}
	apply(2)
	if _, st, _ = f.svc.BucketState(ctx, olga, b.Name); st.Sync != manage.Ahead {
		t.Fatalf("redis ahead: %+v", st)
	}
	d, err := f.svc.BucketDetail(ctx, olga, b.Name, 1)
	if err != nil || d.LiveErr != nil || d.Live.Sync != manage.Ahead || !d.CanEdit {
		t.Fatalf("detail: %+v %v", d, err)
	}
}

func TestUsersNeedTheAdminRole(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	root, olga := f.user("root", true), f.user("olga", false)
	if _, err := f.svc.ListUsers(ctx, olga); !errors.Is(err, errs.ErrForbidden) {
		t.Fatalf("non-admin lists users: %v", err)
	}
	if _, err := f.svc.CreateUser(ctx, root, manage.CreateUser{Username: "ann", Password: "a long passphrase", Admin: true}); err != nil {
		t.Fatal(err)
	}
	users, err := f.svc.ListUsers(ctx, root)
	if err != nil || len(users) != 3 {
		t.Fatalf("users %v %v", users, err)
	}
	for _, u := range users {
		if u.Username == "ann" && !u.Admin {
			t.Fatal("ann was created as an admin but is not one")
		}
	}
	if err := f.svc.SetDisabled(ctx, root, manage.SetDisabled{User: "root", Disabled: true}); errs.Fields(err).For("user") == "" {
		t.Fatalf("an admin disables themselves: %v", err)
	}
	if err := f.svc.SetAdmin(ctx, root, manage.SetAdmin{User: "ghost", Admin: true}); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("admin role for a missing user: %v", err)
	}
	if err := f.svc.SetDisabled(ctx, olga, manage.SetDisabled{User: "ann", Disabled: true}); !errors.Is(err, errs.ErrForbidden) {
		t.Fatalf("non-admin disables a user: %v", err)
	}
	if err := f.svc.SetDisabled(ctx, root, manage.SetDisabled{User: "olga", Disabled: true}); err != nil {
		t.Fatal(err)
	}
}

func TestTokensAreTheCallersOwn(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	olga, vic := f.user("olga", false), f.user("vic", false)
	secret, tok, err := f.svc.CreateToken(ctx, olga, manage.CreateToken{Name: "ci"})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.svc.RevokeToken(ctx, vic, manage.RevokeToken{ID: tok.ID}); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("revoking another user's token: %v, want not found", err)
	}
	c, err := f.svc.TokenCaller(ctx, secret, "192.0.2.9", "GET /x")
	if err != nil || c.Name() != "olga" || c.Actor().Via != "api token ci" {
		t.Fatalf("token caller %+v %v", c, err)
	}
	// A second use within the minute is not audited again.
	if _, err := f.svc.TokenCaller(ctx, secret, "192.0.2.9", "GET /y"); err != nil {
		t.Fatal(err)
	}
	if n := len(f.entries("token.use")); n != 1 {
		t.Fatalf("token.use audited %d times, want 1", n)
	}
	if err := f.svc.RevokeToken(ctx, olga, manage.RevokeToken{ID: tok.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.TokenCaller(ctx, secret, "192.0.2.9", "GET /x"); !errors.Is(err, errs.ErrUnauthenticated) {
		t.Fatalf("revoked token: %v", err)
	}
}

func TestBucketStateWithoutRedis(t *testing.T) {
	db := testenv.MySQL(t)
	enf, err := rbac.New(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := manage.New(manage.Config{DB: db, Enforcer: enf, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	if _, _, err := svc.BucketState(context.Background(), manage.Caller{}, "x"); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("state of a missing bucket: %v", err)
	}
}
