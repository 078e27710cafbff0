package buckets

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jmoiron/sqlx"

	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/redisscript/names"
	"github.com/sluicehq/sluice/internal/redisscript/quota"
)

// Store keeps bucket definitions in MySQL. It is safe for concurrent use.
type Store struct {
	db *sqlx.DB
}

// NewStore returns a Store on db, a pool opened with database.Open.
func NewStore(db *sqlx.DB) *Store { return &Store{db: db} }

// Filter selects buckets for List.
type Filter struct {
	// Search keeps buckets whose name contains it (case-insensitive,
	// literal: '%' and '_' match only themselves).
	Search string
	// App keeps buckets that the app owns or is allowed on.
	App string
	// VisibleTo keeps buckets whose owner app or one of whose allowed apps
	// is listed (the caller's apps). nil means every bucket (admins); an
	// empty non-nil slice selects none.
	VisibleTo []string
	// After is the cursor: the name of the last bucket of the previous page.
	After string
	// Before, when After is empty, asks for the page that ends just before
	// this name (the previous page).
	Before string
	// Limit is the page size: database.PageSize reads it.
	Limit int
}

// Page is one page of buckets ordered by name.
type Page struct {
	Buckets []*Bucket `json:"buckets"`
	// Next is the cursor of the next page, "" on the last one.
	Next string `json:"next,omitempty"`
	// Prev is the Before cursor of the previous page, "" on the first one.
	Prev string `json:"prev,omitempty"`
	// Total counts every bucket the filter selects, on all pages.
	Total int `json:"total"`
	// Offset counts the buckets the filter selects before this page.
	Offset int `json:"-"`
}

func notFound(name string) error { return fmt.Errorf("bucket %q: %w", name, errs.ErrNotFound) }

// row is a bucket as the database returns it.
type row struct {
	ID          int64  `db:"id"`
	Name        string `db:"name"`
	OwnerApp    string `db:"owner_app"`
	Kind        string `db:"kind"`
	Description string `db:"description"`
	MaxPermits  int64  `db:"max_permits"`
	RatePermits string `db:"rate_permits"`
	RatePeriod  int64  `db:"rate_period_seconds"`
	Keyed       bool   `db:"keyed"`
	Shadow      bool   `db:"shadow"`
	LeaseMillis int64  `db:"lease_ms"`
	QuotaPeriod string `db:"quota_period"`
	TimeZone    string `db:"time_zone"`
	SlotMillis  int64  `db:"slot_ms"`
	Reserve     int64  `db:"reserve"`
	database.Stamp
}

// STRAIGHT_JOIN reads buckets first: a page in name order then walks the
// name index and stops at the page's end, where MariaDB would otherwise
// start from the few apps and sort every bucket.
const selectBuckets = bucketColumns + ` FROM buckets b STRAIGHT_JOIN apps o ON o.id = b.owner_app_id`

// listBuckets is selectBuckets read in name order, for List's pages.
const listBuckets = bucketColumns + ` FROM buckets b FORCE INDEX (buckets_name) STRAIGHT_JOIN apps o ON o.id = b.owner_app_id`

// countBuckets counts rows of buckets b with their owner app o.
const countBuckets = `SELECT COUNT(*) FROM buckets b JOIN apps o ON o.id = b.owner_app_id`

// bucketColumns selects a row of buckets b with its owner app o.
const bucketColumns = `SELECT b.id, b.name, o.name AS owner_app, b.kind, b.description, b.max_permits,
	b.rate_permits, b.rate_period_seconds, b.keyed, b.shadow, b.lease_ms, b.slot_ms, b.quota_period, b.time_zone, b.reserve, b.version,
	b.created_by, b.updated_by, b.created_at, b.updated_at`

func (r *row) bucket() (*Bucket, error) {
	rate, err := storedRate(r.RatePermits, r.RatePeriod)
	if err != nil {
		return nil, fmt.Errorf("bucket %q: %w", r.Name, err)
	}
	return &Bucket{
		ID: r.ID, Name: r.Name, OwnerApp: r.OwnerApp, Kind: Kind(r.Kind), Description: r.Description,
		MaxPermits: r.MaxPermits, Rate: rate, AllowedApps: []string{}, Keyed: r.Keyed, Shadow: r.Shadow, LeaseMillis: r.LeaseMillis,
		SlotMillis: r.SlotMillis, QuotaPeriod: quota.Period(r.QuotaPeriod), TimeZone: r.TimeZone, Reserve: r.Reserve, Stamp: r.Stamp,
	}, nil
}

// storedRate rebuilds a Rate from its DECIMAL and INT columns, exactly.
func storedRate(permits string, periodSeconds int64) (Rate, error) {
	micro, err := parsePermits(permits)
	if err != nil {
		return Rate{}, fmt.Errorf("stored rate %q per %d s: %w", permits, periodSeconds, err)
	}
	return Rate{PermitsMicro: micro, Period: time.Duration(periodSeconds) * time.Second}, nil
}

// withApps loads the allowed apps of bs (all buckets when all is set) in
// one query.
func withApps(ctx context.Context, q sqlx.QueryerContext, bs []*Bucket, all bool) error {
	if len(bs) == 0 {
		return nil
	}
	byID := make(map[int64]*Bucket, len(bs))
	ids := make([]int64, len(bs))
	for i, b := range bs {
		byID[b.ID] = b
		ids[i] = b.ID
	}
	query := `SELECT ba.bucket_id, a.name FROM bucket_apps ba JOIN apps a ON a.id = ba.app_id`
	var args []any
	if !all {
		var err error
		query, args, err = sqlx.In(query+` WHERE ba.bucket_id IN (?)`, ids)
		if err != nil {
			return fmt.Errorf("load allowed apps: %w", err)
		}
	}
	rows, err := q.QueryxContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("load allowed apps: %w", database.Translate(err))
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var name string
		if err := rows.Scan(&id, &name); err != nil {
			return fmt.Errorf("load allowed apps: %w", database.Translate(err))
		}
		if b := byID[id]; b != nil {
			b.AllowedApps = append(b.AllowedApps, name)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load allowed apps: %w", database.Translate(err))
	}
	for _, b := range bs {
		slices.Sort(b.AllowedApps)
	}
	return nil
}

func selectRows(ctx context.Context, q sqlx.QueryerContext, query string, args ...any) ([]*Bucket, error) {
	return database.SelectAll(ctx, q, (*row).bucket, query, args...)
}

func get(ctx context.Context, q sqlx.QueryerContext, name string) (*Bucket, error) {
	if !names.Valid(name) {
		return nil, notFound(name)
	}
	bs, err := selectRows(ctx, q, selectBuckets+` WHERE b.name = ?`, name)
	if err != nil {
		return nil, fmt.Errorf("get bucket %q: %w", name, err)
	}
	if len(bs) == 0 {
		return nil, notFound(name)
	}
	if err := withApps(ctx, q, bs, false); err != nil {
		return nil, err
	}
	return bs[0], nil
}

// lock takes the row lock of the bucket named name in tx and returns the
// bucket as committed. Only the bucket row is locked, not its owner app's.
func lock(ctx context.Context, tx *database.Tx, name string) (*Bucket, error) {
	if !names.Valid(name) {
		return nil, notFound(name)
	}
	var id int64
	err := tx.GetContext(ctx, &id, `SELECT id FROM buckets WHERE name = ? FOR UPDATE`, name)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound(name)
	}
	if err != nil {
		return nil, fmt.Errorf("lock bucket %q: %w", name, database.Translate(err))
	}
	return get(ctx, tx, name)
}

// lockShared takes a shared lock on the rows of the buckets named in of
// (valid names) in tx and returns those that exist, as committed: changes
// of these buckets and of their overrides (which take the bucket's row
// lock) wait until tx ends.
func lockShared(ctx context.Context, tx *database.Tx, of []string) ([]*Bucket, error) {
	// LOCK IN SHARE MODE rather than FOR SHARE: MariaDB knows only the former.
	q, args, err := sqlx.In(`SELECT id FROM buckets WHERE name IN (?) LOCK IN SHARE MODE`, of)
	if err != nil {
		return nil, fmt.Errorf("lock buckets: %w", err)
	}
	var ids []int64
	if err := tx.SelectContext(ctx, &ids, q, args...); err != nil {
		return nil, fmt.Errorf("lock buckets: %w", database.Translate(err))
	}
	if len(ids) == 0 {
		return nil, nil
	}
	// Read after the lock: the snapshot of tx starts here, so it holds the
	// rows as locked.
	q, args, err = sqlx.In(selectBuckets+` WHERE b.id IN (?)`, ids)
	if err != nil {
		return nil, fmt.Errorf("load buckets: %w", err)
	}
	bs, err := selectRows(ctx, tx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("load buckets: %w", err)
	}
	if err := withApps(ctx, tx, bs, false); err != nil {
		return nil, err
	}
	return bs, nil
}

// WithDefinition calls fn with the current definition of the bucket named
// name, or with nil when there is none, as WithDefinitions does.
func (s *Store) WithDefinition(ctx context.Context, name string, fn func(*Bucket) error) error {
	return s.WithDefinitions(ctx, []string{name}, func(defs map[string]*Bucket) error { return fn(defs[name]) })
}

// WithDefinitions calls fn with the current definitions of those of the
// buckets named in of that exist, by name, and holds a shared lock on
// their rows until fn returns: a change or delete of one of them (or of
// its overrides) commits only after that. The sync worker writes the
// definitions to Redis inside fn, so a definition never reaches Redis
// after the change that replaced it committed. It is one transaction of
// three queries however many names. fn should be brief and must not use
// the store: the -dev engine's pool has a single connection.
func (s *Store) WithDefinitions(ctx context.Context, of []string, fn func(map[string]*Bucket) error) error {
	valid := make([]string, 0, len(of))
	for _, name := range of {
		if names.Valid(name) {
			valid = append(valid, name)
		}
	}
	return database.InTx(ctx, s.db, func(tx *database.Tx) error {
		defs := make(map[string]*Bucket, len(valid))
		if len(valid) > 0 {
			bs, err := lockShared(ctx, tx, valid)
			if err != nil {
				return err
			}
			for _, b := range bs {
				defs[b.Name] = b
			}
		}
		return fn(defs)
	})
}

// Get returns the bucket named name, or an error matching errs.ErrNotFound.
func (s *Store) Get(ctx context.Context, name string) (*Bucket, error) {
	return get(ctx, s.db, name)
}

// Definition returns the current definition of one bucket, for the sync
// worker's re-checks; an error matching errs.ErrNotFound means it is gone.
func (s *Store) Definition(ctx context.Context, name string) (*Bucket, error) {
	return s.Get(ctx, name)
}

// Definitions returns every bucket with its allowed apps, ordered by name,
// for the sync worker's full reconcile. It reads one consistent snapshot in
// two queries, whatever the number of buckets.
func (s *Store) Definitions(ctx context.Context) ([]*Bucket, error) {
	var out []*Bucket
	err := database.InTx(ctx, s.db, func(tx *database.Tx) error {
		// Sorted here, not by the server: with the owner app joined, an
		// ORDER BY made MariaDB copy every row (description included) into
		// a temporary table on disk to sort it.
		bs, err := selectRows(ctx, tx, selectBuckets)
		if err != nil {
			return fmt.Errorf("load bucket definitions: %w", err)
		}
		slices.SortFunc(bs, func(a, b *Bucket) int { return strings.Compare(a.Name, b.Name) })
		if err := withApps(ctx, tx, bs, true); err != nil {
			return err
		}
		out = bs
		return nil
	})
	return out, err
}

// conditions are f's search, app and visibility as SQL conditions on
// buckets b joined with their owner app o (for sqlx.In), without the
// cursor.
func (f Filter) conditions() (where []string, args []any) {
	if f.Search != "" {
		where = append(where, `b.name LIKE ? ESCAPE '!'`)
		args = append(args, likeContains(f.Search))
	}
	for _, apps := range f.ofApps() {
		where = append(where, ofAppsSQL)
		args = append(args, apps, apps)
	}
	return where, args
}

// ofApps lists the app lists f keeps the buckets of: its app filter and
// its visibility.
func (f Filter) ofApps() [][]string {
	var out [][]string
	if f.App != "" {
		out = append(out, []string{f.App})
	}
	if f.VisibleTo != nil {
		out = append(out, f.VisibleTo)
	}
	return out
}

// ofAppsSQL is who may see bucket b, in SQL: it is owned by one of the
// apps its two parameters list (the same list twice, for sqlx.In) or
// allows one of them; the members of those apps see it
// (rbac.Enforcer.CanSeeBucket is the rule in memory). Both subqueries are
// uncorrelated, so the server reads each once (the ids of a few apps, the
// allowed-app rows of those apps: as many as the buckets they see) and
// then checks a bucket by two lookups in memory: a list walks its index
// in its own order and stops at the page's end. An IN over a UNION of the
// two, its earlier form, is run again for every bucket by MariaDB (no
// semi-join with a UNION): a member's count cost 40,000 index reads at
// 10,000 buckets, a page of 500 as many.
const ofAppsSQL = `(b.owner_app_id IN (SELECT vo.id FROM apps vo WHERE vo.name IN (?))
	OR b.id IN (SELECT vba.bucket_id FROM bucket_apps vba JOIN apps va ON va.id = vba.app_id WHERE va.name IN (?)))`

// countOfAppsSQL counts the buckets of ofAppsSQL's apps (its two
// parameters): a union of the two app indexes' entries.
const countOfAppsSQL = `SELECT COUNT(*) FROM (SELECT vb.id FROM buckets vb WHERE vb.owner_app_id IN
	(SELECT vo.id FROM apps vo WHERE vo.name IN (?)) UNION SELECT vba.bucket_id FROM bucket_apps vba JOIN apps va
	ON va.id = vba.app_id WHERE va.name IN (?)) v`

// List returns one page of the buckets f selects, ordered by name, each
// with its allowed apps.
func (s *Store) List(ctx context.Context, f Filter) (Page, error) {
	limit := database.PageSize(f.Limit)
	if f.VisibleTo != nil {
		f.VisibleTo = slices.DeleteFunc(slices.Clone(f.VisibleTo), func(n string) bool { return !names.Valid(n) })
	}
	// Input that no bucket can match is answered without a query, which
	// also keeps invalid UTF-8 away from the server.
	if (f.VisibleTo != nil && len(f.VisibleTo) == 0) || (f.App != "" && !names.Valid(f.App)) ||
		!utf8.ValidString(f.Search) || !utf8.ValidString(f.After) || !utf8.ValidString(f.Before) {
		return Page{Buckets: []*Bucket{}}, nil
	}
	where, args := f.conditions()
	var page Page
	var err error
	count, countArgs := countBuckets+database.Where(where), args
	if apps := f.ofApps(); f.Search == "" && len(apps) == 1 {
		// The buckets of one app list (a member's, an app's): counted from
		// the two app indexes, as many entries as buckets counted, not a
		// check of every bucket.
		count, countArgs = countOfAppsSQL, []any{apps[0], apps[0]}
	}
	if page.Total, err = database.Count(ctx, s.db, count, countArgs...); err != nil {
		return Page{}, fmt.Errorf("count buckets: %w", err)
	}

	backward := f.After == "" && f.Before != ""
	order := ` ORDER BY b.name LIMIT ?`
	switch {
	case f.After != "":
		where = append(where, `b.name > ?`)
		args = append(args, f.After)
	case backward:
		where = append(where, `b.name < ?`)
		args = append(args, f.Before)
		order = ` ORDER BY b.name DESC LIMIT ?`
	}
	args = append(args, limit+1)
	// In name order from the name index, whatever the filter: the server
	// would otherwise read every visible bucket and sort them for a page
	// of 500 (about a fifth of them visible).
	q, qargs, err := sqlx.In(listBuckets+database.Where(where)+order, args...)
	if err != nil {
		return Page{}, fmt.Errorf("list buckets: %w", err)
	}
	bs, err := selectRows(ctx, s.db, q, qargs...)
	if err != nil {
		return Page{}, fmt.Errorf("list buckets: %w", err)
	}
	bs, next, prev := database.Keyset(bs, limit, backward, f.After != "")
	if next >= 0 {
		page.Next = bs[next].Name
	}
	if prev >= 0 {
		page.Prev = bs[prev].Name
	}
	if len(bs) > 0 && (f.After != "" || f.Before != "") {
		// The page's position is one more count on the name index, so a
		// deep page says where it is rather than "1-25" again.
		where, args := f.conditions()
		where = append(where, `b.name < ?`)
		args = append(args, bs[0].Name)
		if page.Offset, err = database.Count(ctx, s.db, countBuckets+database.Where(where), args...); err != nil {
			return Page{}, fmt.Errorf("count buckets: %w", err)
		}
	}
	if err := withApps(ctx, s.db, bs, false); err != nil {
		return Page{}, err
	}
	page.Buckets = bs
	return page, nil
}

// appIDs resolves the owner and allowed apps of b to ids, reporting unknown
// names as a *errs.Validation.
func appIDs(ctx context.Context, tx *database.Tx, b *Bucket) (owner int64, allowed []int64, err error) {
	names := append([]string{b.OwnerApp}, b.AllowedApps...)
	query, args, err := sqlx.In(`SELECT id, name FROM apps WHERE name IN (?)`, names)
	if err != nil {
		return 0, nil, fmt.Errorf("resolve apps: %w", err)
	}
	var found []struct {
		ID   int64  `db:"id"`
		Name string `db:"name"`
	}
	if err := tx.SelectContext(ctx, &found, query, args...); err != nil {
		return 0, nil, fmt.Errorf("resolve apps: %w", database.Translate(err))
	}
	ids := make(map[string]int64, len(found))
	for _, f := range found {
		ids[f.Name] = f.ID
	}
	var v errs.Validation
	owner, ok := ids[b.OwnerApp]
	if !ok {
		v.Add("owner_app", unknownApps([]string{b.OwnerApp}))
	}
	var missing []string
	for _, n := range b.AllowedApps {
		id, ok := ids[n]
		if !ok {
			if n != b.OwnerApp { // already reported on owner_app
				missing = append(missing, n)
			}
			continue
		}
		allowed = append(allowed, id)
	}
	if len(missing) > 0 {
		v.Add("allowed_apps", unknownApps(missing))
	}
	if err := v.Err(); err != nil {
		return 0, nil, err
	}
	return owner, allowed, nil
}

func insertApps(ctx context.Context, tx *database.Tx, bucketID int64, appIDs []int64) error {
	if len(appIDs) == 0 {
		return nil
	}
	values := strings.TrimSuffix(strings.Repeat("(?, ?),", len(appIDs)), ",")
	args := make([]any, 0, 2*len(appIDs))
	for _, id := range appIDs {
		args = append(args, bucketID, id)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO bucket_apps (bucket_id, app_id) VALUES `+values, args...); err != nil {
		return fmt.Errorf("save allowed apps: %w", database.Translate(err))
	}
	return nil
}

// Create saves a new bucket, setting its ID, Version (1), timestamps and
// authors. A taken name gives an error matching errs.ErrConflict; an
// unknown owner or allowed app a *errs.Validation on that field.
func (s *Store) Create(ctx context.Context, actor audit.Actor, b *Bucket) error {
	if err := b.Validate(); err != nil {
		return err
	}
	n := *b
	n.AllowedApps = slices.Clone(b.AllowedApps)
	n.Stamp = database.NewStamp(actor.User)
	err := database.InTx(ctx, s.db, func(tx *database.Tx) error {
		owner, allowed, err := appIDs(ctx, tx, &n)
		if err != nil {
			return err
		}
		id, err := database.Insert(ctx, tx, `INSERT INTO buckets (name, owner_app_id, kind, description, max_permits,
			rate_permits, rate_period_seconds, keyed, shadow, lease_ms, slot_ms, quota_period, time_zone, reserve, version, created_by,
			created_at, updated_by, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			n.Name, owner, string(n.Kind), n.Description, n.MaxPermits, n.Rate.Permits(), n.Rate.PeriodSeconds(), n.Keyed, n.Shadow, n.LeaseMillis,
			n.SlotMillis, string(n.QuotaPeriod), n.TimeZone, n.Reserve,
			n.Version, n.CreatedBy, n.CreatedAt, n.UpdatedBy, n.UpdatedAt)
		if database.IsDuplicate(err) {
			// Bucket names are one namespace across Sluice, so a taken name
			// is told whoever owns it; nothing else about that bucket is.
			return errs.Conflictf("a bucket named %q already exists; bucket names are unique across Sluice, choose another", n.Name)
		}
		if err != nil {
			return fmt.Errorf("insert bucket %q: %w", n.Name, err)
		}
		n.ID = id
		if err := insertApps(ctx, tx, n.ID, allowed); err != nil {
			return err
		}
		return recordChange(ctx, tx, actor, nil, &n)
	})
	if err != nil {
		return err
	}
	*b = n
	return nil
}

// Update saves the description, capacity, rate, shadow mode, lease,
// reserve and allowed apps of the bucket named b.Name; the fields fixed at creation
// (Bucket.CheckFixed, which the application layer checks) are kept as
// stored. b.Version must be the version the caller read: when the bucket
// changed since, nothing changes and the error is an *errs.Stale. b.ID,
// when set, must be the row the caller read and authorized: a bucket
// deleted and created again under the same name is another bucket, and
// gives errs.ErrNotFound. On success b holds the stored bucket, its
// Version one higher.
func (s *Store) Update(ctx context.Context, actor audit.Actor, b *Bucket) error {
	if err := b.Validate(); err != nil {
		return err
	}
	var saved Bucket
	err := database.InTx(ctx, s.db, func(tx *database.Tx) error {
		old, err := lock(ctx, tx, b.Name)
		if err != nil {
			return err
		}
		if b.ID != 0 && old.ID != b.ID {
			return notFound(b.Name)
		}
		if err := old.CheckVersion(b.Version); err != nil {
			return err
		}
		saved = *old
		saved.Description, saved.MaxPermits, saved.Rate, saved.Shadow = b.Description, b.MaxPermits, b.Rate, b.Shadow
		saved.LeaseMillis, saved.SlotMillis, saved.QuotaPeriod, saved.TimeZone, saved.Reserve = b.LeaseMillis, b.SlotMillis, b.QuotaPeriod, b.TimeZone, b.Reserve
		saved.AllowedApps = slices.Clone(b.AllowedApps)
		saved.Stamp = old.Stamp.Next(actor.User)
		_, allowed, err := appIDs(ctx, tx, &saved)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE buckets SET description = ?, max_permits = ?, rate_permits = ?,
			rate_period_seconds = ?, shadow = ?, lease_ms = ?, slot_ms = ?, quota_period = ?, time_zone = ?, reserve = ?, version = ?,
			updated_by = ?, updated_at = ? WHERE id = ? AND version = ?`,
			saved.Description, saved.MaxPermits, saved.Rate.Permits(), saved.Rate.PeriodSeconds(), saved.Shadow, saved.LeaseMillis,
			saved.SlotMillis, string(saved.QuotaPeriod), saved.TimeZone, saved.Reserve,
			saved.Version, saved.UpdatedBy, saved.UpdatedAt, old.ID, old.Version); err != nil {
			return fmt.Errorf("update bucket %q: %w", b.Name, database.Translate(err))
		}
		if !slices.Equal(old.AllowedApps, saved.AllowedApps) {
			if _, err := tx.ExecContext(ctx, `DELETE FROM bucket_apps WHERE bucket_id = ?`, old.ID); err != nil {
				return fmt.Errorf("update allowed apps of %q: %w", b.Name, database.Translate(err))
			}
			if err := insertApps(ctx, tx, old.ID, allowed); err != nil {
				return err
			}
		}
		return recordChange(ctx, tx, actor, old, &saved)
	})
	if err != nil {
		return err
	}
	*b = saved
	return nil
}

// recordChange writes the outbox event and the audit row of bucket n, created
// (old is nil) or updated from old, in the transaction that saved it.
func recordChange(ctx context.Context, tx *database.Tx, actor audit.Actor, old, n *Bucket) error {
	if err := writeEvent(ctx, tx, OpUpsert, n, n.Version); err != nil {
		return err
	}
	e := audit.Entry{Action: "bucket.create", ObjectType: "bucket", ObjectName: n.Name, App: n.OwnerApp, After: audit.Snapshot(n)}
	if old != nil {
		e.Action, e.Before = "bucket.update", audit.Snapshot(old)
	}
	return audit.Write(ctx, tx, actor, e)
}

// Expect is what a caller read, and checked permissions on, before
// deleting a bucket. The delete happens only if the row locked in its
// transaction is still that bucket: a name can be deleted and taken again
// by another app between the caller's read and the delete. Zero fields are
// not checked.
type Expect struct {
	// ID is the row the caller read (Bucket.ID).
	ID int64
	// OwnerApp is the owner app on which the caller's permission was
	// checked.
	OwnerApp string
	// Version is the version the caller read; a newer one gives an
	// *errs.Stale.
	Version int64
}

// Delete removes the bucket named name if it is the bucket want describes.
// Another row under that name, or another owner app, gives
// errs.ErrNotFound (the bucket the caller saw is gone, and the one now
// bearing its name may be invisible to them); a newer version an
// *errs.Stale. Either way nothing is deleted.
func (s *Store) Delete(ctx context.Context, actor audit.Actor, name string, want Expect) error {
	return database.InTx(ctx, s.db, func(tx *database.Tx) error {
		old, err := lock(ctx, tx, name)
		if err != nil {
			return err
		}
		if (want.ID != 0 && old.ID != want.ID) || (want.OwnerApp != "" && old.OwnerApp != want.OwnerApp) {
			return notFound(name)
		}
		if err := old.CheckVersion(want.Version); err != nil {
			return err
		}
		// Allowed apps first: the schema's cascade is not relied on, so the
		// statement works the same on every engine.
		if _, err := tx.ExecContext(ctx, `DELETE FROM bucket_apps WHERE bucket_id = ?`, old.ID); err != nil {
			return fmt.Errorf("delete bucket %q: %w", name, database.Translate(err))
		}
		if old.Keyed {
			if _, err := tx.ExecContext(ctx, `DELETE FROM bucket_overrides WHERE bucket_id = ?`, old.ID); err != nil {
				return fmt.Errorf("delete overrides of bucket %q: %w", name, database.Translate(err))
			}
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM buckets WHERE id = ?`, old.ID); err != nil {
			return fmt.Errorf("delete bucket %q: %w", name, database.Translate(err))
		}
		if err := writeEvent(ctx, tx, OpDelete, old, old.Version+1); err != nil {
			return err
		}
		return audit.Write(ctx, tx, actor, audit.Entry{
			Action: "bucket.delete", ObjectType: "bucket", ObjectName: name, App: old.OwnerApp,
			Before: audit.Snapshot(old),
		})
	})
}

// likeContains is the LIKE pattern of names containing s, in any case:
// names are lower case.
func likeContains(s string) string { return database.LikeContains(strings.ToLower(s)) }
