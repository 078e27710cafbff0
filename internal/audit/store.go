package audit

import (
	"context"
	"fmt"
	"strings"
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
	if f.Apps != nil && len(f.Apps) == 0 {
		return Page{Entries: []Entry{}}, nil
	}
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
		// Write records "alice (api)" for channels other than the console.
		add(`(actor = ? OR actor LIKE ? ESCAPE '!')`, f.Actor, escapeLike(f.Actor)+" (%")
	}
	if f.Action != "" {
		add(`action = ?`, f.Action)
	}
	if f.Apps != nil {
		add(`app IN (?)`, f.Apps)
	}
	if f.Before > 0 {
		add(`id < ?`, f.Before)
	}
	query := `SELECT id, at, actor, action, object_type, object_name, app,
		COALESCE(before_json, '') AS before_json, COALESCE(after_json, '') AS after_json, remote_addr, detail
		FROM audit_log`
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += ` ORDER BY id DESC LIMIT ?`
	args = append(args, limit+1)
	query, args, err := sqlx.In(query, args...)
	if err != nil {
		return Page{}, fmt.Errorf("list audit log: %w", err)
	}
	page := Page{Entries: []Entry{}}
	if err := s.db.SelectContext(ctx, &page.Entries, query, args...); err != nil {
		return Page{}, fmt.Errorf("list audit log: %w", database.Translate(err))
	}
	if len(page.Entries) > limit {
		page.Entries = page.Entries[:limit]
		page.Next = page.Entries[limit-1].ID
	}
	return page, nil
}

func escapeLike(s string) string {
	return strings.NewReplacer("!", "!!", "%", "!%", "_", "!_").Replace(s)
}
