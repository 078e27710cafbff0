package apps

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/jmoiron/sqlx"

	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/redisscript/names"
)

// Store keeps apps in MySQL. It is safe for concurrent use.
type Store struct {
	db *sqlx.DB
}

// NewStore returns a Store on db, a pool opened with database.Open.
func NewStore(db *sqlx.DB) *Store { return &Store{db: db} }

// Filter selects apps for List.
type Filter struct {
	// Search keeps apps whose name contains it (case-insensitive, literal).
	Search string
	// Names keeps only the named apps (the caller's memberships); nil
	// means every app, an empty non-nil slice none.
	Names []string
	// After is the cursor: the name of the last app of the previous page.
	After string
	// Limit is the page size: database.PageSize reads it.
	Limit int
}

// Page is one page of apps ordered by name.
type Page struct {
	Apps []*App `json:"apps"`
	// Next is the cursor of the next page, "" on the last one.
	Next string `json:"next,omitempty"`
	// Total counts every app the filter selects, on all pages.
	Total int `json:"total"`
}

const columns = `id, name, description, version, created_by, updated_by, created_at, updated_at`

// Create registers a, setting its ID, Version (1), timestamps and authors.
// Each of also runs in the same transaction after the insert, so that, for
// example, the creator's owner role commits or fails together with the app.
// A taken name gives an error matching errs.ErrConflict.
func (s *Store) Create(ctx context.Context, actor audit.Actor, a *App, also ...func(ctx context.Context, tx *database.Tx) error) error {
	if err := a.Validate(); err != nil {
		return err
	}
	n := *a
	n.Stamp = database.NewStamp(actor.User)
	err := database.InTx(ctx, s.db, func(tx *database.Tx) error {
		id, err := database.Insert(ctx, tx, `INSERT INTO apps
			(name, description, version, created_by, created_at, updated_by, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)`,
			n.Name, n.Description, n.Version, n.CreatedBy, n.CreatedAt, n.UpdatedBy, n.UpdatedAt)
		if database.IsDuplicate(err) {
			return errs.Conflictf("an app named %q already exists", n.Name)
		}
		if err != nil {
			return fmt.Errorf("insert app: %w", err)
		}
		n.ID = id
		for _, fn := range also {
			if err := fn(ctx, tx); err != nil {
				return err
			}
		}
		return audit.Write(ctx, tx, actor, audit.Entry{
			Action: "app.create", ObjectType: "app", ObjectName: n.Name, App: n.Name,
			After: audit.Snapshot(n),
		})
	})
	if err != nil {
		return err
	}
	*a = n
	return nil
}

// Get returns the app named name, or an error matching errs.ErrNotFound.
func (s *Store) Get(ctx context.Context, name string) (*App, error) {
	if !names.Valid(name) {
		return nil, fmt.Errorf("app %q: %w", name, errs.ErrNotFound)
	}
	var a App
	err := s.db.GetContext(ctx, &a, `SELECT `+columns+` FROM apps WHERE name = ?`, name)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("app %q: %w", name, errs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get app %q: %w", name, database.Translate(err))
	}
	return &a, nil
}

// List returns one page of the apps f selects, ordered by name.
func (s *Store) List(ctx context.Context, f Filter) (Page, error) {
	limit := database.PageSize(f.Limit)
	if f.Names != nil {
		f.Names = slices.DeleteFunc(slices.Clone(f.Names), func(n string) bool { return !names.Valid(n) })
	}
	// Input that no app can match is answered without a query, which also
	// keeps invalid UTF-8 away from the server.
	if (f.Names != nil && len(f.Names) == 0) || !utf8.ValidString(f.Search) || !utf8.ValidString(f.After) {
		return Page{Apps: []*App{}}, nil
	}
	var where []string
	var args []any
	if f.Search != "" {
		where = append(where, `name LIKE ? ESCAPE '!'`)
		args = append(args, likeContains(f.Search))
	}
	if f.Names != nil {
		where = append(where, `name IN (?)`)
		args = append(args, f.Names)
	}
	var page Page
	var err error
	if page.Total, err = database.Count(ctx, s.db, `SELECT COUNT(*) FROM apps`+database.Where(where), args...); err != nil {
		return Page{}, fmt.Errorf("count apps: %w", err)
	}

	if f.After != "" {
		where = append(where, `name > ?`)
		args = append(args, f.After)
	}
	args = append(args, limit+1)
	q, qargs, err := sqlx.In(`SELECT `+columns+` FROM apps`+database.Where(where)+` ORDER BY name LIMIT ?`, args...)
	if err != nil {
		return Page{}, fmt.Errorf("list apps: %w", err)
	}
	page.Apps = []*App{}
	if err := s.db.SelectContext(ctx, &page.Apps, q, qargs...); err != nil {
		return Page{}, fmt.Errorf("list apps: %w", database.Translate(err))
	}
	if len(page.Apps) > limit {
		page.Apps = page.Apps[:limit]
		page.Next = page.Apps[limit-1].Name
	}
	return page, nil
}

// likeContains is the LIKE pattern of names containing s, in any case:
// names are lower case.
func likeContains(s string) string { return database.LikeContains(strings.ToLower(s)) }
