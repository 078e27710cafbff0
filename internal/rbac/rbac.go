// Package rbac decides who may do what in Sluice. It is the only package
// that knows Casbin: the model is RBAC with domains, where the domain is the
// app name. Each app has owners and viewers; the global admin role holds in
// every app and over users.
//
// The permission rules are few and constant (see rules); who holds which
// role on which app lives in role assignments. Both are stored in MySQL
// (casbin_rule). Every change bumps policy_revision in the same transaction,
// and every console instance polls that revision (Run) and reloads, so a
// revoked role takes effect everywhere within a second.
//
// Subjects are typed: users are "user:NAME" and roles "role:NAME", so no
// user name, whatever it is, can stand for a role. The in-memory policy is
// only ever built from committed rows, never patched ahead of a commit.
package rbac

import (
	"context"
	_ "embed"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/casbin/casbin/v2"
	"github.com/casbin/casbin/v2/model"
	"github.com/jmoiron/sqlx"

	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/periodic"
	"github.com/sluicehq/sluice/internal/redisscript/names"
)

// Role is a role a user holds on one app.
type Role string

// The roles on an app, from the highest.
const (
	// RoleOwner may view and edit the app and its buckets and manage its members.
	RoleOwner Role = "owner"
	// RoleViewer may view the app and the buckets it owns or may use.
	RoleViewer Role = "viewer"
)

// roleAdmin is the global role, granted in the domain globalDomain.
const (
	roleAdmin    = "admin"
	globalDomain = "*"
)

// Casbin subjects carry their kind, so that the user "viewer" and the role
// viewer are different subjects. Both prefixes have the same length, which
// the migration that introduced them relies on.
const (
	userPrefix = "user:"
	rolePrefix = "role:"
)

// userSubject is the Casbin subject of the user named name.
func userSubject(name string) string { return userPrefix + name }

// roleSubject is the Casbin subject of the role r.
func roleSubject(r string) string { return rolePrefix + r }

// userOf returns the user name of a subject, and false for other subjects.
func userOf(subject string) (string, bool) {
	name, ok := strings.CutPrefix(subject, userPrefix)
	return name, ok && name != ""
}

// roleOfSubject returns the role name of a subject, and false for others.
func roleOfSubject(subject string) (string, bool) {
	name, ok := strings.CutPrefix(subject, rolePrefix)
	return name, ok && name != ""
}

// Valid reports whether r is a role that can be granted on an app.
func (r Role) Valid() bool { return r == RoleOwner || r == RoleViewer }

// Description says in plain words what r lets its holder do on an app, ""
// for anything that is not a role. Every page that offers or shows a role
// says it with these words, and the permission model below is what they
// describe.
func (r Role) Description() string {
	switch r {
	case RoleOwner:
		return "sees the app and its buckets, creates, edits and deletes its buckets, and manages its members"
	case RoleViewer:
		return "sees the app, its members and its buckets with their live state and usage, and changes nothing"
	}
	return ""
}

// AdminDescription says in plain words what the global admin role lets
// its holder do.
const AdminDescription = "does everything on every app and bucket, manages users and reads the whole audit log"

// rank orders roles so that Apps can report the highest one.
func (r Role) rank() int {
	switch r {
	case RoleOwner:
		return 2
	case RoleViewer:
		return 1
	}
	return 0
}

// Action is what a user wants to do on an app.
type Action string

// The actions checked by Can.
const (
	// ActionView: see the app, its members and its buckets.
	ActionView Action = "view"
	// ActionEdit: create, edit and delete buckets owned by the app; edit the app.
	ActionEdit Action = "edit"
	// ActionManage: grant and revoke roles on the app.
	ActionManage Action = "manage"
)

// Member is one user's role on an app.
type Member struct {
	User string `json:"user"`
	Role Role   `json:"role"`
}

//go:embed model.conf
var modelText string

// rules are the permission rules: which role may do which action. They are
// the same for every app and kept in code; New stores them in casbin_rule
// so that the table holds the whole policy.
var rules = [][]string{
	{"p", roleSubject(roleAdmin), "*"},
	{"p", roleSubject(string(RoleOwner)), string(ActionView)},
	{"p", roleSubject(string(RoleOwner)), string(ActionEdit)},
	{"p", roleSubject(string(RoleOwner)), string(ActionManage)},
	{"p", roleSubject(string(RoleViewer)), string(ActionView)},
}

// PollInterval is how often Run checks the policy revision; with a reload
// it bounds how long a change on another instance takes to apply here.
const PollInterval = 200 * time.Millisecond

// refreshTimeout bounds the reload that follows a change made here.
const refreshTimeout = 5 * time.Second

// Enforcer answers permission questions from an in-memory copy of the
// policy and changes the policy in MySQL. It is safe for concurrent use.
type Enforcer struct {
	db      *sqlx.DB
	adapter *adapter
	// Log receives reload failures of Run; nil means slog.Default().
	Log *slog.Logger

	mu  sync.RWMutex
	ce  *casbin.Enforcer
	idx index
	// rev is the revision of the policy loaded last.
	rev int64
	// started numbers reloads in the order they began; applied is the
	// number of the one in memory. A reload that began later read later
	// committed state, so one that began earlier never replaces it.
	started, applied uint64
	// stale says a change committed here could not be loaded, so Run
	// reloads even if the revision seems unchanged.
	stale bool
}

// index answers the questions Casbin's API answers by scanning every
// role assignment: the apps of a user and the admins. It is built from the
// same committed rows as the Casbin enforcer beside it, never changed on
// its own.
type index struct {
	roles  map[string]map[string]Role // user -> app -> role
	admins map[string]bool
}

func newIndex() index {
	return index{roles: map[string]map[string]Role{}, admins: map[string]bool{}}
}

// add records the assignment g(user, role, domain).
func (x index) add(user, role, domain string) {
	if role == roleAdmin && domain == globalDomain {
		x.admins[user] = true
		return
	}
	r := Role(role)
	if !r.Valid() || domain == globalDomain {
		return
	}
	apps := x.roles[user]
	if apps == nil {
		apps = map[string]Role{}
		x.roles[user] = apps
	}
	if r.rank() > apps[domain].rank() {
		apps[domain] = r
	}
}

// New loads the policy from db, a pool on a migrated database, first
// storing the permission rules if the table does not hold exactly them.
// Call Run to follow changes made by other instances.
func New(ctx context.Context, db *sqlx.DB) (*Enforcer, error) {
	if _, err := model.NewModelFromString(modelText); err != nil {
		return nil, fmt.Errorf("parse casbin model: %w", err)
	}
	e := &Enforcer{db: db, adapter: &adapter{db: db}}
	if err := e.storeRules(ctx); err != nil {
		return nil, err
	}
	if err := e.Reload(ctx); err != nil {
		return nil, err
	}
	return e, nil
}

// storeRules makes the stored "p" lines equal to rules, so that a new
// version of the rules replaces the old one on start-up.
func (e *Enforcer) storeRules(ctx context.Context) error {
	var stored []ruleRow
	if err := e.db.SelectContext(ctx, &stored,
		`SELECT ptype, v0, v1, v2, v3, v4, v5 FROM casbin_rule WHERE ptype = 'p'`); err != nil {
		return fmt.Errorf("read permission rules: %w", database.Translate(err))
	}
	if sameRules(stored) {
		return nil
	}
	return database.InTx(ctx, e.db, func(tx *sqlx.Tx) error {
		// Lock first: two instances starting at once write the rules once.
		if err := bump(ctx, tx); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM casbin_rule WHERE ptype = 'p'`); err != nil {
			return fmt.Errorf("replace permission rules: %w", database.Translate(err))
		}
		for _, r := range rules {
			if err := insertRule(ctx, tx, r[0], r[1:]); err != nil {
				return err
			}
		}
		return nil
	})
}

func sameRules(stored []ruleRow) bool {
	if len(stored) != len(rules) {
		return false
	}
	for _, r := range rules {
		if !slices.ContainsFunc(stored, func(s ruleRow) bool {
			return slices.Equal(append([]string{s.PType}, s.values()...), r)
		}) {
			return false
		}
	}
	return true
}

// Reload reads the whole policy from MySQL and replaces the in-memory copy.
func (e *Enforcer) Reload(ctx context.Context) error {
	_, err := e.reload(ctx)
	return err
}

// reload is Reload, reporting whether the loaded policy was applied (it is
// not when a reload that began later was applied first).
func (e *Enforcer) reload(ctx context.Context) (bool, error) {
	e.mu.Lock()
	e.started++
	seq := e.started
	e.mu.Unlock()
	// The revision is read before the rules: rules newer than the revision
	// only cause one more reload, never a missed one.
	rev, err := revision(ctx, e.db)
	if err != nil {
		return false, err
	}
	stored, err := e.adapter.rules(ctx)
	if err != nil {
		return false, err
	}
	ce, idx, err := build(stored)
	if err != nil {
		return false, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if seq < e.applied {
		return false, nil
	}
	e.ce, e.idx, e.rev, e.applied, e.stale = ce, idx, rev, seq, false
	return true, nil
}

// refresh loads the committed policy after this instance changed it, so
// the change applies here on the next request. A failure leaves the policy
// marked stale: Run loads it at its next tick.
func (e *Enforcer) refresh(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), refreshTimeout)
	defer cancel()
	if _, err := e.reload(ctx); err != nil {
		e.mu.Lock()
		e.stale = true
		e.mu.Unlock()
		e.log().WarnContext(ctx, "rbac: cannot load the policy after a change; retrying", "err", err)
	}
}

// build makes a Casbin enforcer and an index holding stored. Rows whose
// subjects are not typed as this version writes them are left out: only a
// role may hold a permission and only a user may hold a role.
func build(stored [][]string) (*casbin.Enforcer, index, error) {
	m, err := model.NewModelFromString(modelText)
	if err != nil {
		return nil, index{}, fmt.Errorf("parse casbin model: %w", err)
	}
	stored = slices.DeleteFunc(slices.Clone(stored), func(r []string) bool { return !wellTyped(r) })
	if err := loadInto(m, stored); err != nil {
		return nil, index{}, err
	}
	ce, err := casbin.NewEnforcer(m)
	if err != nil {
		return nil, index{}, fmt.Errorf("create casbin enforcer: %w", err)
	}
	// Without an adapter Casbin keeps changes in memory only; the stores
	// write MySQL themselves, inside their transactions.
	ce.EnableAutoSave(false)
	if err := ce.BuildRoleLinks(); err != nil {
		return nil, index{}, fmt.Errorf("build casbin role links: %w", err)
	}
	idx := newIndex()
	for _, r := range stored {
		if r[0] == "g" && len(r) == 4 {
			user, _ := userOf(r[1])
			role, _ := roleOfSubject(r[2])
			idx.add(user, role, r[3])
		}
	}
	return ce, idx, nil
}

// wellTyped reports whether a stored rule has the subjects this version
// writes: "p" lines start with a role, "g" lines give a user a role.
func wellTyped(r []string) bool {
	if len(r) < 2 {
		return false
	}
	switch r[0] {
	case "p":
		_, ok := roleOfSubject(r[1])
		return ok
	case "g":
		if len(r) != 4 {
			return false
		}
		_, isUser := userOf(r[1])
		_, isRole := roleOfSubject(r[2])
		return isUser && isRole
	}
	return false
}

// Run polls the policy revision every PollInterval and reloads when it
// changed, until ctx ends. Failures are logged and retried on the next
// tick: a console keeps answering from the last policy it loaded.
func (e *Enforcer) Run(ctx context.Context) error {
	var latch periodic.Latch
	periodic.Every(ctx, PollInterval, func(ctx context.Context) {
		err := e.poll(ctx)
		switch {
		case ctx.Err() != nil || !latch.Changed(err):
		case err != nil:
			e.log().WarnContext(ctx, "rbac: cannot reload the policy; using the last one loaded", "err", err)
		default:
			e.log().InfoContext(ctx, "rbac: policy reloads again")
		}
	})
	return nil
}

// poll reloads when the stored revision differs from the loaded one, or
// when a change made here could not be loaded after its commit.
func (e *Enforcer) poll(ctx context.Context) error {
	rev, err := revision(ctx, e.db)
	if err != nil {
		return err
	}
	e.mu.RLock()
	stale := rev != e.rev || e.stale
	e.mu.RUnlock()
	if !stale {
		return nil
	}
	_, err = e.reload(ctx)
	return err
}

func (e *Enforcer) log() *slog.Logger {
	if e.Log != nil {
		return e.Log
	}
	return slog.Default()
}

// Can reports whether user may do a on app. Admins may do everything.
// Invalid names are never allowed.
func (e *Enforcer) Can(user, app string, a Action) bool {
	if !names.Valid(user) || !names.Valid(app) {
		return false
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	ok, err := e.ce.Enforce(userSubject(user), app, string(a))
	return err == nil && ok
}

// IsAdmin reports whether user holds the global admin role.
func (e *Enforcer) IsAdmin(user string) bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.idx.admins[user]
}

// Apps returns the apps on which user holds a role, with the highest role
// held on each. Admin rights are not included: an admin who is no member
// of any app gets an empty map.
func (e *Enforcer) Apps(user string) map[string]Role {
	e.mu.RLock()
	defer e.mu.RUnlock()
	out := maps.Clone(e.idx.roles[user])
	if out == nil {
		out = map[string]Role{}
	}
	return out
}

// Visible returns the apps whose data user may see: nil for admins, who
// see everything, else the sorted names of the apps user is a member of
// (non-nil, possibly empty). It suits the Names and Apps filters of the
// stores, where nil means everything.
func (e *Enforcer) Visible(user string) []string {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.idx.admins[user] {
		return nil
	}
	names := slices.Sorted(maps.Keys(e.idx.roles[user]))
	if names == nil {
		names = []string{}
	}
	return names
}

// CanSeeBucket reports whether user may see a bucket owned by ownerApp
// that the apps in allowed may take tokens from: admins and members of
// any of those apps may.
func (e *Enforcer) CanSeeBucket(user, ownerApp string, allowed []string) bool {
	if e.Can(user, ownerApp, ActionView) {
		return true
	}
	for _, app := range allowed {
		if e.Can(user, app, ActionView) {
			return true
		}
	}
	return false
}

// Members returns the members of app, read from MySQL, ordered by user.
func (e *Enforcer) Members(ctx context.Context, app string) ([]Member, error) {
	return members(ctx, e.db, app, false)
}

// members reads the role assignments on app; lock takes row locks for a
// check inside a change.
func members(ctx context.Context, q sqlx.QueryerContext, app string, lock bool) ([]Member, error) {
	query := `SELECT v0, v1 FROM casbin_rule WHERE ptype = 'g' AND v2 = ? ORDER BY v0`
	if lock {
		query += ` FOR UPDATE`
	}
	// Ordering by the subject orders by user name: every user subject has
	// the same prefix.
	rows, err := q.QueryxContext(ctx, query, app)
	if err != nil {
		return nil, fmt.Errorf("list members of app %q: %w", app, database.Translate(err))
	}
	defer rows.Close()
	out := []Member{}
	for rows.Next() {
		var userSub, roleSub string
		if err := rows.Scan(&userSub, &roleSub); err != nil {
			return nil, fmt.Errorf("list members of app %q: %w", app, database.Translate(err))
		}
		user, isUser := userOf(userSub)
		role, isRole := roleOfSubject(roleSub)
		r := Role(role)
		if !isUser || !isRole || !r.Valid() {
			continue
		}
		// A user holds one role per app; should two be stored, the
		// highest counts, as in Apps.
		if n := len(out); n > 0 && out[n-1].User == user {
			if r.rank() > out[n-1].Role.rank() {
				out[n-1].Role = r
			}
			continue
		}
		out = append(out, Member{User: user, Role: r})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list members of app %q: %w", app, database.Translate(err))
	}
	return out, nil
}
