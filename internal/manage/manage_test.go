package manage_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/accounts"
	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/manage"
	"github.com/sluicehq/sluice/internal/rbac"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/internal/usage"
)

// fixture is a Service on a fresh database and a private Redis key space,
// with the stores behind it for arranging and checking.
type fixture struct {
	t       *testing.T
	db      *sqlx.DB
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
	return &fixture{t: t, db: db, svc: svc, acc: acc, enf: enf, buckets: buckets.NewStore(db), audit: audit.NewStore(db),
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

// keyedBucket creates the keyed bucket "per-key" of app owner as c: 10
// tokens per key, 1/s.
func (f *fixture) keyedBucket(c manage.Caller, owner string) *buckets.Bucket {
	f.t.Helper()
	fields := bucketFields("per-key", owner, 10, "1/s")
	fields.Keyed = ptr(true)
	b, err := f.svc.CreateBucket(context.Background(), c, manage.CreateBucket{Fields: fields})
	if err != nil {
		f.t.Fatal(err)
	}
	return b
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
	// Someone else taking a name in use gets no role on the app.
	oscar := f.user("oscar", false)
	if _, err := f.svc.CreateApp(ctx, oscar, manage.CreateApp{Name: "alpha"}); !errors.Is(err, errs.ErrConflict) {
		t.Fatalf("duplicate app by another user: %v, want a conflict", err)
	}
	if _, err := f.svc.App(ctx, oscar, "alpha"); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("a failed registration granted a role: %v", err)
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
	if msg, _ := errs.PublicMessage(err); msg != `managing the members of app "alpha" needs its owner role` {
		t.Errorf("viewer grant: message %q", msg)
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
	if _, err := f.svc.GrantRole(ctx, olga, manage.GrantRole{App: "alpha", User: "vic"}); errs.Fields(err).For("role") == "" {
		t.Errorf("no role: %v, want a field error on role", err)
	}
	for _, user := range []string{"nobody", "Bad Name"} {
		if _, err := f.svc.GrantRole(ctx, olga, manage.GrantRole{App: "alpha", User: user, Role: "viewer"}); errs.Fields(err).For("user") == "" {
			t.Errorf("grant to %q: %v, want a field error on user", user, err)
		}
	}
	if err := f.svc.RevokeRole(ctx, olga, manage.RevokeRole{App: "alpha", User: "olga"}); !errors.Is(err, errs.ErrConflict) {
		t.Errorf("revoking the last owner: %v, want a conflict", err)
	}
	if _, err := f.svc.GrantRole(ctx, olga, manage.GrantRole{App: "alpha", User: "olga", Role: "viewer"}); !errors.Is(err, errs.ErrConflict) {
		t.Errorf("demoting the last owner: %v, want a conflict", err)
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
	var stale *errs.Stale
	_, err = f.svc.UpdateBucket(ctx, olga, manage.UpdateBucket{Name: b.Name, Version: 1,
		Fields: manage.BucketPatch{MaxPermits: ptr(int64(30))}})
	if !errors.As(err, &stale) || stale.Version != 2 || !errors.Is(err, errs.ErrStale) {
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

func TestViewersCannotChangeBuckets(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	olga, vic := f.user("olga", false), f.user("vic", false)
	f.app(olga, "alpha")
	if _, err := f.svc.GrantRole(ctx, olga, manage.GrantRole{App: "alpha", User: "vic", Role: "viewer"}); err != nil {
		t.Fatal(err)
	}
	b, err := f.svc.CreateBucket(ctx, olga, manage.CreateBucket{Fields: bucketFields("alpha-api", "alpha", 10, "1/s")})
	if err != nil {
		t.Fatal(err)
	}
	denied := len(f.entries("access.denied"))
	_, err = f.svc.UpdateBucket(ctx, vic, manage.UpdateBucket{Name: b.Name, Version: 1, Fields: manage.BucketPatch{MaxPermits: ptr(int64(1))}})
	if !errors.Is(err, errs.ErrForbidden) {
		t.Fatalf("viewer update: %v, want forbidden", err)
	}
	if got, err := f.buckets.Get(ctx, b.Name); err != nil || got.MaxPermits != 10 || got.Version != 1 {
		t.Fatalf("after a refused update: %+v %v", got, err)
	}
	if n := len(f.entries("access.denied")); n != denied+1 {
		t.Fatalf("%d denied accesses audited, want %d", n, denied+1)
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
	denied := len(f.entries("access.denied"))
	if err := f.svc.RevokeToken(ctx, vic, manage.RevokeToken{ID: tok.ID}); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("revoking another user's token: %v, want not found", err)
	}
	if n := len(f.entries("access.denied")); n != denied+1 {
		t.Fatalf("%d denied accesses audited, want %d", n, denied+1)
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

func TestBucketModeFields(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	olga := f.user("olga", false)
	f.app(olga, "alpha")
	fields := bucketFields("alpha-keys", "alpha", 10, "1/s")
	fields.Keyed, fields.Shadow, fields.LeaseMillis = ptr(true), ptr(true), ptr(int64(250))
	b, err := f.svc.CreateBucket(ctx, olga, manage.CreateBucket{Fields: fields})
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.svc.Bucket(ctx, olga, b.Name)
	if err != nil || !got.Keyed || !got.Shadow || got.LeaseMillis != 250 {
		t.Fatalf("created: %+v %v", got, err)
	}

	// Keyed is fixed at creation.
	_, err = f.svc.UpdateBucket(ctx, olga, manage.UpdateBucket{Name: b.Name, Fields: manage.BucketPatch{Keyed: ptr(false)}})
	if errs.Fields(err).For("keyed") == "" {
		t.Fatalf("unkeying: %v, want a field error on keyed", err)
	}
	// Giving the same value is no change.
	ch, err := f.svc.UpdateBucket(ctx, olga, manage.UpdateBucket{Name: b.Name, Version: 1,
		Fields: manage.BucketPatch{Keyed: ptr(true), Shadow: ptr(true), LeaseMillis: ptr(int64(250))}})
	if err != nil || ch.Changed {
		t.Fatalf("same modes: %+v %v", ch, err)
	}
	// Shadow and lease alone are changes.
	ch, err = f.svc.UpdateBucket(ctx, olga, manage.UpdateBucket{Name: b.Name, Version: 1,
		Fields: manage.BucketPatch{Shadow: ptr(false)}})
	if err != nil || !ch.Changed || ch.Bucket.Shadow || ch.Bucket.Version != 2 {
		t.Fatalf("shadow off: %+v %v", ch.Bucket, err)
	}
	ch, err = f.svc.UpdateBucket(ctx, olga, manage.UpdateBucket{Name: b.Name, Version: 2,
		Fields: manage.BucketPatch{LeaseMillis: ptr(int64(0))}})
	if err != nil || !ch.Changed || ch.Bucket.LeaseMillis != 0 {
		t.Fatalf("lease off: %+v %v", ch.Bucket, err)
	}
	_, err = f.svc.UpdateBucket(ctx, olga, manage.UpdateBucket{Name: b.Name,
		Fields: manage.BucketPatch{LeaseMillis: ptr(int64(5))}})
	if errs.Fields(err).For("lease_ms") == "" {
		t.Fatalf("lease 5 ms: %v, want a field error on lease_ms", err)
	}
	// A full replace keeps keyed and resets shadow and lease.
	if _, err := f.svc.UpdateBucket(ctx, olga, manage.UpdateBucket{Name: b.Name,
		Fields: manage.BucketPatch{Shadow: ptr(true), LeaseMillis: ptr(int64(100))}}); err != nil {
		t.Fatal(err)
	}
	ch, err = f.svc.UpdateBucket(ctx, olga, manage.UpdateBucket{Name: b.Name, Replace: true,
		Fields: manage.BucketPatch{MaxPermits: ptr(int64(10)), Rate: ptr("1/s")}})
	if err != nil || !ch.Bucket.Keyed || ch.Bucket.Shadow || ch.Bucket.LeaseMillis != 0 {
		t.Fatalf("replace: %+v %v", ch.Bucket, err)
	}
	stored, err := f.buckets.Get(ctx, b.Name)
	if err != nil || !stored.Keyed || stored.Shadow || stored.LeaseMillis != 0 {
		t.Fatalf("stored after replace: %+v %v", stored, err)
	}
	// An invalid lease at creation is a field error, and nothing is saved.
	bad := bucketFields("alpha-bad", "alpha", 10, "1/s")
	bad.LeaseMillis = ptr(int64(10_001))
	if _, err := f.svc.CreateBucket(ctx, olga, manage.CreateBucket{Fields: bad}); errs.Fields(err).For("lease_ms") == "" {
		t.Fatalf("create with lease 10001: %v", err)
	}
}

func TestOverrides(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	olga := f.user("olga", false)
	vera := f.user("vera", false)
	mallory := f.user("mallory", false)
	f.app(olga, "alpha")
	if _, err := f.svc.GrantRole(ctx, olga, manage.GrantRole{App: "alpha", User: "vera", Role: string(rbac.RoleViewer)}); err != nil {
		t.Fatal(err)
	}
	f.keyedBucket(olga, "alpha")
	if _, err := f.svc.CreateBucket(ctx, olga, manage.CreateBucket{Fields: bucketFields("shared", "alpha", 10, "1/s")}); err != nil {
		t.Fatal(err)
	}
	patch := func(match, key string, capacity int64, rate string) manage.OverridePatch {
		return manage.OverridePatch{Match: &match, Key: &key, MaxPermits: &capacity, Rate: &rate}
	}

	// Validation reports every field; a bucket that is not keyed is refused.
	_, err := f.svc.CreateOverride(ctx, olga, manage.CreateOverride{Bucket: "per-key", Fields: patch("fuzzy", "", 0, "lots")})
	if v := errs.Fields(err); v.For("match") == "" || v.For("key") == "" || v.For("max_permits") == "" || v.For("rate") == "" {
		t.Fatalf("invalid override: %v", err)
	}
	_, err = f.svc.CreateOverride(ctx, olga, manage.CreateOverride{Bucket: "shared", Fields: patch("exact", "k", 5, "1/s")})
	if errs.Fields(err).For("bucket") == "" {
		t.Fatalf("override of an unkeyed bucket: %v", err)
	}
	// Only owners change; viewers read; others see nothing.
	if _, err := f.svc.CreateOverride(ctx, vera, manage.CreateOverride{Bucket: "per-key", Fields: patch("exact", "k", 5, "1/s")}); !errors.Is(err, errs.ErrForbidden) {
		t.Fatalf("viewer creates: %v", err)
	}
	if _, err := f.svc.CreateOverride(ctx, mallory, manage.CreateOverride{Bucket: "per-key", Fields: patch("exact", "k", 5, "1/s")}); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("stranger creates: %v", err)
	}
	o, err := f.svc.CreateOverride(ctx, olga, manage.CreateOverride{Bucket: "per-key", Fields: patch("exact", "premium:1", 100, "10/s")})
	if err != nil || o.ID == 0 || o.Version != 1 {
		t.Fatalf("create: %+v %v", o, err)
	}
	if _, err := f.svc.CreateOverride(ctx, olga, manage.CreateOverride{Bucket: "per-key", Fields: patch("exact", "premium:1", 1, "1/s")}); !errors.Is(err, errs.ErrConflict) {
		t.Fatalf("duplicate: %v", err)
	}
	if _, err := f.svc.CreateOverride(ctx, olga, manage.CreateOverride{Bucket: "per-key", Fields: patch("prefix", "premium:", 50, "5/s")}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.CreateOverride(ctx, olga, manage.CreateOverride{Bucket: "per-key", Fields: patch("exact", "basic:1", 1, "1/min")}); err != nil {
		t.Fatal(err)
	}
	if n := len(f.entries("override.create")); n != 3 {
		t.Fatalf("%d override.create audit entries, want 3", n)
	}

	page, err := f.svc.ListOverrides(ctx, vera, "per-key", manage.OverrideQuery{Search: "premium", Limit: 1})
	if err != nil || page.Total != 2 || len(page.Overrides) != 1 || page.Next == "" {
		t.Fatalf("viewer lists: %+v %v", page, err)
	}
	page, err = f.svc.ListOverrides(ctx, vera, "per-key", manage.OverrideQuery{Search: "premium", Limit: 1, After: page.Next})
	if err != nil || len(page.Overrides) != 1 || page.Next != "" {
		t.Fatalf("second page: %+v %v", page, err)
	}
	if _, err := f.svc.ListOverrides(ctx, mallory, "per-key", manage.OverrideQuery{}); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("stranger lists: %v", err)
	}
	v, err := f.svc.Override(ctx, vera, "per-key", o.ID)
	if err != nil || v.CanEdit || v.Key != "premium:1" {
		t.Fatalf("viewer reads: %+v %v", v, err)
	}
	if _, err := f.svc.Override(ctx, olga, "shared", o.ID); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("override through another bucket: %v", err)
	}

	// Updates: no-ops, fixed key, stale versions.
	ch, err := f.svc.UpdateOverride(ctx, olga, manage.UpdateOverride{Bucket: "per-key", ID: o.ID, Version: 1,
		Fields: manage.OverridePatch{Rate: ptr("10 per second")}})
	if err != nil || ch.Changed {
		t.Fatalf("no-op: %+v %v", ch, err)
	}
	_, err = f.svc.UpdateOverride(ctx, olga, manage.UpdateOverride{Bucket: "per-key", ID: o.ID, Fields: manage.OverridePatch{Key: ptr("other")}})
	if errs.Fields(err).For("key") == "" {
		t.Fatalf("key change: %v", err)
	}
	ch, err = f.svc.UpdateOverride(ctx, olga, manage.UpdateOverride{Bucket: "per-key", ID: o.ID, Version: 1,
		Fields: manage.OverridePatch{MaxPermits: ptr(int64(200))}})
	if err != nil || !ch.Changed || ch.Override.Version != 2 || ch.Override.MaxPermits != 200 {
		t.Fatalf("update: %+v %v", ch, err)
	}
	var stale *errs.Stale
	_, err = f.svc.UpdateOverride(ctx, olga, manage.UpdateOverride{Bucket: "per-key", ID: o.ID, Version: 1,
		Fields: manage.OverridePatch{MaxPermits: ptr(int64(300))}})
	if !errors.As(err, &stale) || stale.Version != 2 || !errors.Is(err, errs.ErrStale) {
		t.Fatalf("stale update: %v", err)
	}
	if _, err := f.svc.UpdateOverride(ctx, vera, manage.UpdateOverride{Bucket: "per-key", ID: o.ID,
		Fields: manage.OverridePatch{MaxPermits: ptr(int64(1))}}); !errors.Is(err, errs.ErrForbidden) {
		t.Fatalf("viewer updates: %v", err)
	}
	if err := f.svc.DeleteOverride(ctx, olga, manage.DeleteOverride{Bucket: "per-key", ID: o.ID, Version: 1}); !errors.As(err, &stale) {
		t.Fatalf("stale delete: %v", err)
	}
	if err := f.svc.DeleteOverride(ctx, vera, manage.DeleteOverride{Bucket: "per-key", ID: o.ID}); !errors.Is(err, errs.ErrForbidden) {
		t.Fatalf("viewer deletes: %v", err)
	}
	if err := f.svc.DeleteOverride(ctx, olga, manage.DeleteOverride{Bucket: "per-key", ID: o.ID, Version: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Override(ctx, olga, "per-key", o.ID); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("deleted override: %v", err)
	}
	if n := len(f.entries("override.delete")); n != 1 {
		t.Fatalf("%d override.delete audit entries, want 1", n)
	}

	// Top keys are read from Redis for those who see the bucket.
	hour := time.Now().Unix() / 3600
	if err := f.rdb.ZAdd(ctx, f.ks.DeniedKeys("per-key", hour), redis.Z{Score: 7, Member: "basic:1"}, redis.Z{Score: 3, Member: "basic:2"}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := f.rdb.ZAdd(ctx, f.ks.TakenKeys("per-key", hour-20), redis.Z{Score: 9, Member: "basic:3"}).Err(); err != nil {
		t.Fatal(err)
	}
	top, err := f.svc.TopKeys(ctx, vera, "per-key", usage.Hour, 0)
	if err != nil || len(top.Denied) != 2 || top.Denied[0] != (usage.KeyCount{Key: "basic:1", Count: 7}) || len(top.Taken) != 0 {
		t.Fatalf("top keys of the hour: %+v %v", top, err)
	}
	top, err = f.svc.TopKeys(ctx, vera, "per-key", usage.Day, 0)
	if err != nil || len(top.Taken) != 1 || top.Taken[0] != (usage.KeyCount{Key: "basic:3", Count: 9}) {
		t.Fatalf("top keys of the day: %+v %v", top, err)
	}
	if _, err := f.svc.TopKeys(ctx, mallory, "per-key", usage.Hour, 0); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("stranger reads top keys: %v", err)
	}

	// A key's live state: the limit that applies and its tokens.
	o2, err := f.svc.CreateOverride(ctx, olga, manage.CreateOverride{Bucket: "per-key", Fields: patch("prefix", "vip:", 100, "10/s")})
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.svc.Bucket(ctx, olga, "per-key")
	if err != nil {
		t.Fatal(err)
	}
	now, err := f.rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	// Full again in 400 s at 10/s: empty now, on any machine.
	k := f.ks.Keyed("per-key", "vip:7")
	if err := f.rdb.Set(ctx, k.State, fmt.Sprintf("%d %d", b.ID, now.Add(400*time.Second).UnixMicro()), time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	_, st, err := f.svc.KeyState(ctx, vera, "per-key", "vip:7")
	if err != nil || st.Override == nil || st.Override.ID != o2.ID || st.MaxPermits != 100 || st.Tokens != 0 || st.Full {
		t.Fatalf("key vip:7: %+v %v", st, err)
	}
	_, st, err = f.svc.KeyState(ctx, vera, "per-key", "zed")
	if err != nil || st.Override != nil || st.MaxPermits != 10 || st.Tokens != 10 || !st.Full {
		t.Fatalf("idle key zed: %+v %v", st, err)
	}
	if _, _, err := f.svc.KeyState(ctx, mallory, "per-key", "vip:7"); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("stranger reads a key: %v", err)
	}
	if _, _, err := f.svc.KeyState(ctx, vera, "per-key", ""); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("empty key: %v", err)
	}
}

func TestKeyedBucketStateReadsTheKeyGroups(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	olga := f.user("olga", false)
	f.app(olga, "alpha")
	b := f.keyedBucket(olga, "alpha")
	_, st, err := f.svc.BucketState(ctx, olga, b.Name)
	if err != nil || !st.Keyed || st.InRedis || st.Sync != manage.Pending || st.RedisTime.IsZero() {
		t.Fatalf("before sync: %+v %v", st, err)
	}
	cfg := redisscript.Config{Name: b.Name, ID: b.ID, Version: 1, Capacity: 10, PermitsMicro: 1_000_000,
		PeriodSeconds: 1, Apps: []string{"alpha"}}
	if _, err := redisscript.ApplyKeyed(ctx, f.rdb, f.ks, cfg, false); err != nil {
		t.Fatal(err)
	}
	_, st, err = f.svc.BucketState(ctx, olga, b.Name)
	if err != nil || !st.Keyed || !st.InRedis || st.Sync != manage.InSync || st.Config.Capacity != 10 {
		t.Fatalf("synced: %+v %v", st, err)
	}
}

// savedMeanwhile runs change, an override change of bucket, while another
// transaction holds the bucket's row lock, which every override change
// takes before it writes. Once change waits for that lock (it has read the
// override by then), the other transaction saves override id as version
// with capacity and commits, so change writes on top of a save it did not
// see. It returns what change returned.
func (f *fixture) savedMeanwhile(bucket string, id, version, capacity int64, change func() error) error {
	f.t.Helper()
	ctx := context.Background()
	tx, err := f.db.BeginTxx(ctx, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `SELECT version FROM buckets WHERE name = ? FOR UPDATE`, bucket); err != nil {
		f.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- change() }()
	for waiting := false; !waiting; {
		select {
		case err := <-done:
			f.t.Fatalf("the change did not wait for the bucket's row lock: %v", err)
		default:
		}
		var n int
		if err := f.db.GetContext(ctx, &n, `SELECT COUNT(*) FROM information_schema.PROCESSLIST
			WHERE DB = DATABASE() AND ID <> CONNECTION_ID() AND INFO LIKE 'SELECT id FROM buckets %FOR UPDATE'`); err != nil {
			f.t.Fatal(err)
		}
		if waiting = n > 0; !waiting {
			time.Sleep(time.Millisecond) // a pause between polls, not a wait for the change
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE bucket_overrides SET max_permits = ?, version = ? WHERE id = ?`, capacity, version, id); err != nil {
		f.t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		f.t.Fatal(err)
	}
	return <-done
}

func TestOverrideChangesRacingAnotherSaveAreStale(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	olga := f.user("olga", false)
	f.app(olga, "alpha")
	f.keyedBucket(olga, "alpha")
	o, err := f.svc.CreateOverride(ctx, olga, manage.CreateOverride{Bucket: "per-key", Fields: manage.OverridePatch{
		Match: ptr("exact"), Key: ptr("premium:1"), MaxPermits: ptr(int64(100)), Rate: ptr("10/s")}})
	if err != nil || o.Version != 1 {
		t.Fatalf("create: %+v %v", o, err)
	}
	before, err := f.buckets.PendingEvents(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}

	// The update read version 1; version 2 is saved before it writes.
	var stale *errs.Stale
	err = f.savedMeanwhile("per-key", o.ID, 2, 150, func() error {
		_, err := f.svc.UpdateOverride(ctx, olga, manage.UpdateOverride{Bucket: "per-key", ID: o.ID, Version: 1,
			Fields: manage.OverridePatch{MaxPermits: ptr(int64(300))}})
		return err
	})
	if !errors.As(err, &stale) || !errors.Is(err, errs.ErrStale) {
		t.Fatalf("update racing a save: %v, want a stale override", err)
	}
	if c := stale.Current.(*buckets.Override); c.ID != o.ID || c.Version != 2 || c.MaxPermits != 150 || stale.Based != 1 {
		t.Fatalf("stale update: current %+v based on %d, want version 2 with capacity 150 based on 1", c, stale.Based)
	}

	// The delete read version 2; version 3 is saved before it deletes.
	err = f.savedMeanwhile("per-key", o.ID, 3, 80, func() error {
		return f.svc.DeleteOverride(ctx, olga, manage.DeleteOverride{Bucket: "per-key", ID: o.ID, Version: 2})
	})
	if !errors.As(err, &stale) || !errors.Is(err, errs.ErrStale) {
		t.Fatalf("delete racing a save: %v, want a stale override", err)
	}
	if c := stale.Current.(*buckets.Override); c.ID != o.ID || c.Version != 3 || c.MaxPermits != 80 || stale.Based != 2 {
		t.Fatalf("stale delete: current %+v based on %d, want version 3 with capacity 80 based on 2", c, stale.Based)
	}

	// Neither stale change wrote anything.
	got, err := f.svc.Override(ctx, olga, "per-key", o.ID)
	if err != nil || got.Version != 3 || got.MaxPermits != 80 {
		t.Fatalf("after the stale changes: %+v %v, want version 3 with capacity 80", got, err)
	}
	if n := len(f.entries("override.update")) + len(f.entries("override.delete")); n != 0 {
		t.Fatalf("stale changes were audited %d times", n)
	}
	if after, err := f.buckets.PendingEvents(ctx, 100); err != nil || len(after) != len(before) {
		t.Fatalf("stale changes sent events: %d before, %d after (%v)", len(before), len(after), err)
	}
}
