package audit

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jmoiron/sqlx"

	"github.com/sluicehq/sluice/internal/database"
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
	// Before is the cursor: the ID of the last entry of the previous page.
	Before int64
	// Limit is the page size: database.PageSize reads it.
	Limit int
}

// Page is one page of entries, newest first.
type Page struct {
	Entries []Entry `json:"entries"`
	// Next is the cursor of the next page (Filter.Before), 0 on the last one.
	Next int64 `json:"next,omitempty"`
}

// perAppMax is the most visible apps List reads one by one. Each app's
// entries are read in index order (app, filter, id), so a page costs a few
// index lookups per app however large the log; beyond that many apps one
// query over all of them is cheaper.
const perAppMax = 50

// List returns one page of the entries f selects, newest first.
func (s *Store) List(ctx context.Context, f Filter) (Page, error) {
	limit := database.PageSize(f.Limit)
	// Invalid UTF-8 matches no entry; answering without a query also keeps
	// it away from the server, which may reject it.
	for _, v := range append([]string{f.App, f.ObjectType, f.ObjectName, f.Actor, f.Action}, f.Apps...) {
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
	var entries []Entry
	var err error
	if f.Apps != nil && len(f.Apps) <= perAppMax {
		// One query per app, merged: every query walks an index in id
		// order and stops after limit+1 rows.
		for _, app := range f.Apps {
			g := f
			g.App, g.Apps = app, nil
			got, err := s.query(ctx, g, limit+1)
			if err != nil {
				return Page{}, err
			}
			entries = append(entries, got...)
		}
		slices.SortFunc(entries, func(a, b Entry) int { return cmp.Compare(b.ID, a.ID) })
		entries = entries[:min(len(entries), limit+1)]
	} else if entries, err = s.query(ctx, f, limit+1); err != nil {
		return Page{}, err
	}
	if entries == nil {
		entries = []Entry{}
	}
	page := Page{Entries: entries}
	if len(page.Entries) > limit {
		page.Entries = page.Entries[:limit]
		page.Next = page.Entries[limit-1].ID
	}
	return page, nil
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

// listSQL is the query of at most n entries f selects, newest first.
func listSQL(f Filter, n int) (string, []any, error) {
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
	query := `SELECT id, at, actor, action, object_type, object_name, app,
		COALESCE(before_json, '') AS before_json, COALESCE(after_json, '') AS after_json, remote_addr, detail
		FROM audit_log`
	if f.App != "" && f.Actor != "" && f.ObjectName == "" {
		// When one actor's entries mostly fall in one app, MariaDB
		// estimates too few rows and intersects two indexes, then sorts
		// them all; this index holds them in id order.
		query += ` FORCE INDEX (audit_log_app_actor)`
	}
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += ` ORDER BY id DESC LIMIT ?`
	args = append(args, n)
	query, args, err := sqlx.In(query, args...)
	if err != nil {
		return "", nil, fmt.Errorf("list audit log: %w", err)
	}
	return query, args, nil
}
