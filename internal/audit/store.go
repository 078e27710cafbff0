package audit

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jmoiron/sqlx"

	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/errs"
)

// Store reads the audit log. Rows are written with Write, inside the
// transaction of the change they describe.
type Store struct {
	db *sqlx.DB
}

// NewStore returns a Store on db, a pool opened with database.Open.
func NewStore(db *sqlx.DB) *Store { return &Store{db: db} }

// Filter selects audit entries for List. Empty fields select everything.
type Filter struct {
	// App keeps entries about the app or its buckets.
	App string
	// ObjectType ("bucket", "app", "user", ...) and ObjectName keep
	// entries about one kind of object or one object.
	ObjectType string
	ObjectName string
	// Actor keeps entries by one user, through any channel.
	Actor string
	// Action keeps one action ("bucket.update").
	Action string
	// From and To keep entries written at or after From and before To;
	// zero times do not limit.
	From, To time.Time
	// Apps is visibility: nil shows every entry (admins); otherwise only
	// entries about the listed apps (the caller's), never entries without
	// an app such as sign-ins. An empty non-nil slice shows none.
	Apps []string
	// ObjectNames keeps entries about any of these objects (at most
	// MaxNames), with ObjectType.
	ObjectNames []string
	// NameContains keeps entries whose object name contains it, as typed:
	// "%" and "_" match themselves. Entries are then read newest first and
	// kept when they match: fast when many do; ObjectNames is the way for
	// a few objects.
	NameContains string
	// Before is the cursor of an older page: the ID of the last entry of
	// the page before it. After is the cursor of a newer page: the ID of the
	// first entry of the page after it. Before wins when both are set.
	Before int64
	After  int64
	// Limit is the page size: database.PageSize reads it.
	Limit int
}

// Page is one page of entries, newest first.
type Page struct {
	Entries []Entry `json:"entries"`
	// Next is the cursor of the next page (Filter.Before), 0 on the last one.
	Next int64 `json:"next,omitempty"`
	// Prev is the cursor of the newer page (Filter.After), 0 on the first
	// one. It is set only when the page was read with Filter.After; the
	// caller knows newer entries exist when it came with Filter.Before.
	Prev int64 `json:"-"`
}

// perAppMax is the most visible apps List reads one by one. Each app's
// entries are read in index order (app, filter, id), so a page costs a
// page of index entries per app however large the log (see partsSQL);
// beyond that many apps one query over all of them is cheaper.
const perAppMax = 50

// List returns one page of the entries f selects, newest first.
func (s *Store) List(ctx context.Context, f Filter) (Page, error) {
	limit := database.PageSize(f.Limit)
	// Invalid UTF-8 matches no entry; answering without a query also keeps
	// it away from the server, which may reject it.
	for _, v := range append([]string{f.App, f.ObjectType, f.ObjectName, f.Actor, f.Action, f.NameContains}, append(f.Apps, f.ObjectNames...)...) {
		if !utf8.ValidString(v) {
			return Page{Entries: []Entry{}}, nil
		}
	}
	if f.Apps != nil {
		if f.App != "" {
			// An app filter within visibility is that one app, if visible.
			if !slices.Contains(f.Apps, f.App) {
				return Page{Entries: []Entry{}}, nil
			}
			f.Apps = []string{f.App}
		}
		f.Apps = slices.Compact(slices.Sorted(slices.Values(f.Apps)))
		if len(f.Apps) == 0 {
			return Page{Entries: []Entry{}}, nil
		}
	}
	older := f.After == 0 || f.Before > 0
	if !older {
		f.Before = 0
	} else {
		f.After = 0
	}
	if len(f.ObjectNames) > MaxNames {
		return Page{}, fmt.Errorf("list audit log: %d object names, at most %d: %w", len(f.ObjectNames), MaxNames, errs.ErrInvalid)
	}
	entries, err := s.query(ctx, f, limit+1)
	if err != nil {
		return Page{}, err
	}
	if entries == nil {
		entries = []Entry{}
	}
	// Older pages are read newest first, away from the cursor; a newer
	// page oldest first from it, then shown newest first, and the older
	// page is the one the cursor came from. Going older, Prev stays 0: the
	// caller knows it came from a newer page.
	var page Page
	var next, prev int
	page.Entries, next, prev = database.Keyset(entries, limit, !older, false)
	if next >= 0 {
		page.Next = page.Entries[next].ID
	}
	if prev >= 0 {
		page.Prev = page.Entries[prev].ID
	}
	return page, nil
}

// MaxNames is the most names Filter.ObjectNames may hold: each is one
// range of the object index, read in id order.
const MaxNames = 50

// countMax is the most entries Count counts: counting is an index scan, so
// it stops there to stay cheap at millions of rows. It was 10,000: the
// scan to tell whether there are more (10,001 index entries) then cost
// every page of the log 4 to 8 ms of the server's time, more than the page
// itself; "1,000+ entries" tells as much to a reader paging the log (the
// bucket list's ranked count stops at 1,000 too).
const countMax = 1_000

// Count returns how many entries f selects, whatever its cursor, up to
// countMax; more tells there are more than that.
func (s *Store) Count(ctx context.Context, f Filter) (n int, more bool, err error) {
	for _, v := range append([]string{f.App, f.ObjectType, f.ObjectName, f.Actor, f.Action, f.NameContains}, append(f.Apps, f.ObjectNames...)...) {
		if !utf8.ValidString(v) {
			return 0, false, nil
		}
	}
	if f.Apps != nil {
		if f.App != "" {
			if !slices.Contains(f.Apps, f.App) {
				return 0, false, nil
			}
			f.Apps = nil
		} else if len(f.Apps) == 0 {
			return 0, false, nil
		}
	}
	if len(f.ObjectNames) > MaxNames {
		return 0, false, fmt.Errorf("count audit log: %d object names, at most %d: %w", len(f.ObjectNames), MaxNames, errs.ErrInvalid)
	}
	f.Before, f.After = 0, 0
	// Is there an entry past countMax? One index scan that stops there,
	// in no order (a COUNT of a LIMIT would also copy every entry into a
	// temporary table and read it back). Only when there is none are the
	// entries, countMax at most, counted.
	query, args, err := countSQL(f)
	if err != nil {
		return 0, false, err
	}
	var past []int
	if err := s.db.SelectContext(ctx, &past, query, args...); err != nil {
		return 0, false, fmt.Errorf("count audit log: %w", database.Translate(err))
	}
	if len(past) > 0 {
		return countMax, true, nil
	}
	where, args := whereSQL(f)
	query, args, err = sqlx.In(`SELECT COUNT(*) FROM audit_log`+where, args...)
	if err != nil {
		return 0, false, fmt.Errorf("count audit log: %w", err)
	}
	if err := s.db.GetContext(ctx, &n, query, args...); err != nil {
		return 0, false, fmt.Errorf("count audit log: %w", database.Translate(err))
	}
	return min(n, countMax), n > countMax, nil
}

// countSQL is Count's first query: a row when f selects more than
// countMax entries, none otherwise.
func countSQL(f Filter) (string, []any, error) {
	where, args := whereSQL(f)
	query, args, err := sqlx.In(`SELECT 1 FROM audit_log`+where+` LIMIT 1 OFFSET ?`, append(args, countMax)...)
	if err != nil {
		return "", nil, fmt.Errorf("count audit log: %w", err)
	}
	return query, args, nil
}

// query reads at most n entries f selects, newest first.
func (s *Store) query(ctx context.Context, f Filter, n int) ([]Entry, error) {
	query, args, err := listSQL(f, n)
	if err != nil {
		return nil, err
	}
	out := []Entry{}
	if err := s.db.SelectContext(ctx, &out, query, args...); err != nil {
		return nil, fmt.Errorf("list audit log: %w", database.Translate(err))
	}
	return out, nil
}

// whereSQL is the WHERE clause of the entries f selects, cursor included.
func whereSQL(f Filter) (string, []any) {
	var where []string
	var args []any
	add := func(cond string, a ...any) {
		where = append(where, cond)
		args = append(args, a...)
	}
	if f.App != "" {
		add(`app = ?`, f.App)
	}
	if f.ObjectType != "" {
		add(`object_type = ?`, f.ObjectType)
	}
	if f.ObjectName != "" {
		add(`object_name = ?`, f.ObjectName)
	}
	if len(f.ObjectNames) > 0 {
		add(`object_name IN (?)`, f.ObjectNames)
	}
	if f.NameContains != "" {
		add(`object_name LIKE ? ESCAPE '!'`, database.LikeContains(f.NameContains))
	}
	if f.Actor != "" {
		// actor_user is the user alone, whatever the channel ("alice"
		// for "alice (api)"), so one index serves the filter in id order.
		add(`actor_user = ?`, f.Actor)
	}
	if f.Action != "" {
		add(`action = ?`, f.Action)
	}
	if f.Apps != nil {
		add(`app IN (?)`, f.Apps)
	}
	if !f.From.IsZero() {
		add(`at >= ?`, f.From.UTC())
	}
	if !f.To.IsZero() {
		add(`at < ?`, f.To.UTC())
	}
	if f.Before > 0 {
		add(`id < ?`, f.Before)
	}
	if f.After > 0 {
		add(`id > ?`, f.After)
	}
	return database.Where(where), args
}

// entryColumns are the columns of an Entry, of the table aliased l.
const entryColumns = `l.id, l.at, l.actor, l.action, l.object_type, l.object_name, l.app,
		COALESCE(l.before_json, '') AS before_json, COALESCE(l.after_json, '') AS after_json, l.remote_addr, l.detail`

// indexFor names the index that holds the entries f selects in id order,
// "" to leave the choice to the server: the object's index for one
// object, else an app's index with f's filter next to it, so that a page
// reads its rows and stops. It is forced: at a million rows, with an
// app's entries a fiftieth of the log, MariaDB estimated a walk of the
// primary key newest first (25,000 rows read for a page of 500) cheaper
// than the app's index range, and for one object of an app it intersected
// two indexes and sorted the result.
func indexFor(f Filter) string {
	switch {
	case f.ObjectType != "" && f.ObjectName != "":
		return "audit_log_object"
	case f.App == "" || f.ObjectName != "":
		return ""
	case f.Actor != "":
		// One actor's entries mostly fall in one app: MariaDB then also
		// estimated too few rows and intersected two indexes.
		return "audit_log_app_actor"
	case f.Action != "":
		return "audit_log_app_action"
	case f.ObjectType != "":
		return "audit_log_app_type"
	}
	return "audit_log_app"
}

// forceIndex is the FROM clause's index hint for f, if any.
func forceIndex(f Filter) string {
	if i := indexFor(f); i != "" {
		return ` FORCE INDEX (` + i + `)`
	}
	return ""
}

// listSQL is the query of at most n entries f selects, newest first, or
// oldest first from f.After.
func listSQL(f Filter, n int) (string, []any, error) {
	if len(f.ObjectNames) == 1 {
		f.ObjectName, f.ObjectNames = f.ObjectNames[0], nil
	}
	if len(f.Apps) == 1 && (f.App == "" || f.App == f.Apps[0]) {
		f.App, f.Apps = f.Apps[0], nil
	}
	order := `id DESC`
	if f.After > 0 && f.Before == 0 {
		order = `id ASC`
	}
	var parts []Filter
	switch {
	case len(f.ObjectNames) > 0:
		// A few bucket names: one range of the object index per name.
		for _, name := range f.ObjectNames {
			g := f
			g.ObjectNames, g.ObjectName = nil, name
			parts = append(parts, g)
		}
	case len(f.Apps) > 0 && len(f.Apps) <= perAppMax && f.ObjectName == "":
		// A member's apps: one range of an app index per app.
		for _, app := range f.Apps {
			g := f
			g.Apps, g.App = nil, app
			parts = append(parts, g)
		}
	default:
		where, args := whereSQL(f)
		query := `SELECT ` + entryColumns + ` FROM audit_log l` + forceIndex(f) + where + ` ORDER BY ` + order + ` LIMIT ?`
		query, args, err := sqlx.In(query, append(args, n)...)
		if err != nil {
			return "", nil, fmt.Errorf("list audit log: %w", err)
		}
		return query, args, nil
	}
	return partsSQL(parts, order, n)
}

// partsSQL is listSQL for entries that lie in several index ranges (one
// per bucket name, or per app of a member): each range is read in id
// order for the ids of its first n entries only (the index holds them:
// no row is read), the ids are merged, and the rows of the n first are
// read by primary key. So a page of 500 of a member of 10 apps reads
// 5,000 index entries and 500 rows, not 5,000 rows.
func partsSQL(parts []Filter, order string, n int) (string, []any, error) {
	var sel []string
	var args []any
	for _, g := range parts {
		where, a := whereSQL(g)
		sel = append(sel, `(SELECT id FROM audit_log`+forceIndex(g)+where+` ORDER BY `+order+` LIMIT ?)`)
		args = append(append(args, a...), n)
	}
	// The union is a derived table: a parenthesized SELECT followed by
	// ORDER BY is a syntax error to the embedded engine of -dev.
	query := `SELECT ` + entryColumns + ` FROM (SELECT id FROM (` + strings.Join(sel, " UNION ALL ") +
		`) AS parts ORDER BY ` + order + ` LIMIT ?) AS page JOIN audit_log l ON l.id = page.id ORDER BY l.` + order
	query, args, err := sqlx.In(query, append(args, n)...)
	if err != nil {
		return "", nil, fmt.Errorf("list audit log: %w", err)
	}
	return query, args, nil
}
