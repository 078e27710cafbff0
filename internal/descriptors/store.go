package descriptors

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/jmoiron/sqlx"

	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/errs"
)

// Store keeps descriptor mappings in MySQL. It is safe for concurrent use.
type Store struct {
	db *sqlx.DB
}

// NewStore returns a Store on db, a pool opened with database.Open.
func NewStore(db *sqlx.DB) *Store { return &Store{db: db} }

func notFound(id int64) error { return fmt.Errorf("descriptor mapping %d: %w", id, errs.ErrNotFound) }

type row struct {
	ID          int64  `db:"id"`
	App         string `db:"app"`
	Domain      string `db:"domain"`
	Entries     string `db:"entries"`
	Bucket      string `db:"bucket"`
	KeyFrom     string `db:"key_from"`
	Description string `db:"description"`
	database.Stamp
}

const selectMappings = `SELECT m.id, a.name AS app, m.domain, m.entries, m.bucket, m.key_from, m.description,
	m.version, m.created_by, m.updated_by, m.created_at, m.updated_at
	FROM descriptor_mappings m JOIN apps a ON a.id = m.app_id`

func (r *row) mapping() (*Mapping, error) {
	m := &Mapping{
		ID: r.ID, App: r.App, Domain: r.Domain, Bucket: r.Bucket, KeyFrom: r.KeyFrom, Description: r.Description,
		Stamp: r.Stamp,
	}
	if err := json.Unmarshal([]byte(r.Entries), &m.Entries); err != nil {
		return nil, fmt.Errorf("descriptor mapping %d: decode entries: %w", r.ID, err)
	}
	return m, nil
}

func selectRows(ctx context.Context, q sqlx.QueryerContext, query string, args ...any) ([]*Mapping, error) {
	ms, err := database.SelectAll(ctx, q, (*row).mapping, query, args...)
	if err != nil {
		return nil, fmt.Errorf("read descriptor mappings: %w", err)
	}
	return ms, nil
}

// Get returns the mapping with id, or an error matching errs.ErrNotFound.
func (s *Store) Get(ctx context.Context, id int64) (*Mapping, error) {
	ms, err := selectRows(ctx, s.db, selectMappings+` WHERE m.id = ?`, id)
	if err != nil {
		return nil, err
	}
	if len(ms) == 0 {
		return nil, notFound(id)
	}
	return ms[0], nil
}

// List returns the mappings of app, by domain and then id.
func (s *Store) List(ctx context.Context, app string) ([]*Mapping, error) {
	return selectRows(ctx, s.db, selectMappings+` WHERE a.name = ? ORDER BY m.domain, m.id`, app)
}

// All returns every mapping and the decision revision they belong to, read
// in one transaction, for the decision services.
func (s *Store) All(ctx context.Context) ([]*Mapping, int64, error) {
	var out []*Mapping
	var rev int64
	err := database.InTx(ctx, s.db, func(tx *database.Tx) error {
		var err error
		if rev, err = revision(ctx, tx); err != nil {
			return err
		}
		out, err = selectRows(ctx, tx, selectMappings+` ORDER BY m.id`)
		return err
	})
	return out, rev, err
}

// Revision returns the decision revision: a number that grows with every
// change of a mapping or an app token. It is one indexed read.
func (s *Store) Revision(ctx context.Context) (int64, error) { return revision(ctx, s.db) }

func revision(ctx context.Context, q sqlx.QueryerContext) (int64, error) {
	var rev int64
	if err := sqlx.GetContext(ctx, q, &rev, `SELECT revision FROM decision_revision WHERE id = 1`); err != nil {
		return 0, fmt.Errorf("read decision revision: %w", database.Translate(err))
	}
	return rev, nil
}

// BumpRevision increases the decision revision inside tx, the transaction
// of a change that decision services must pick up.
func BumpRevision(ctx context.Context, tx *database.Tx) error {
	if _, err := tx.ExecContext(ctx, `UPDATE decision_revision SET revision = revision + 1 WHERE id = 1`); err != nil {
		return fmt.Errorf("bump decision revision: %w", database.Translate(err))
	}
	return nil
}

// appID returns the id of the app named name, or a *errs.Validation on app.
func appID(ctx context.Context, tx *database.Tx, name string) (int64, error) {
	var id int64
	err := tx.GetContext(ctx, &id, `SELECT id FROM apps WHERE name = ?`, name)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, errs.Invalid("app", fmt.Sprintf("unknown app %q", name))
	}
	if err != nil {
		return 0, fmt.Errorf("read app %q: %w", name, database.Translate(err))
	}
	return id, nil
}

// checkBucket refuses a bucket that does not exist or does not list app as
// an allowed app: such a mapping could never grant anything.
func checkBucket(ctx context.Context, tx *database.Tx, bucket, app string) error {
	var n int
	if err := tx.GetContext(ctx, &n, `SELECT COUNT(*) FROM buckets b
		JOIN bucket_apps ba ON ba.bucket_id = b.id JOIN apps a ON a.id = ba.app_id
		WHERE b.name = ? AND a.name = ?`, bucket, app); err != nil {
		return fmt.Errorf("check bucket %q: %w", bucket, database.Translate(err))
	}
	if n == 0 {
		return errs.Invalid("bucket", fmt.Sprintf("no bucket %q that app %q may take tokens from", bucket, app))
	}
	return nil
}

func encodeEntries(es []Entry) (string, error) {
	b, err := json.Marshal(es)
	if err != nil {
		return "", fmt.Errorf("encode entries: %w", err)
	}
	return string(b), nil
}

func duplicate(m *Mapping) error {
	return errs.Conflictf("app %q already maps these descriptor entries in domain %q; edit that mapping instead", m.App, m.Domain)
}

// Create stores m, setting its ID, Version (1), timestamps and authors.
// The app must exist and the bucket must list it as an allowed app (else a
// *errs.Validation); a mapping of the app with the same domain and entries
// gives an error matching errs.ErrConflict. The creation is audited.
func (s *Store) Create(ctx context.Context, actor audit.Actor, m *Mapping) error {
	if err := m.Validate(); err != nil {
		return err
	}
	n := *m
	n.Entries = slices.Clone(m.Entries)
	n.Stamp = database.NewStamp(actor.User)
	entries, err := encodeEntries(n.Entries)
	if err != nil {
		return err
	}
	err = database.InTx(ctx, s.db, func(tx *database.Tx) error {
		app, err := appID(ctx, tx, n.App)
		if err != nil {
			return err
		}
		if err := checkBucket(ctx, tx, n.Bucket, n.App); err != nil {
			return err
		}
		id, err := database.Insert(ctx, tx, `INSERT INTO descriptor_mappings (app_id, domain, entries, match_hash, bucket,
			key_from, description, version, created_by, created_at, updated_by, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			app, n.Domain, entries, n.matchHash(), n.Bucket, n.KeyFrom, n.Description, n.Version,
			n.CreatedBy, n.CreatedAt, n.UpdatedBy, n.UpdatedAt)
		if database.IsDuplicate(err) {
			return duplicate(&n)
		}
		if err != nil {
			return fmt.Errorf("insert descriptor mapping: %w", err)
		}
		n.ID = id
		if err := BumpRevision(ctx, tx); err != nil {
			return err
		}
		return audit.Write(ctx, tx, actor, audit.Entry{
			Action: "mapping.create", ObjectType: "mapping", ObjectName: objectName(&n), App: n.App,
			After: audit.Snapshot(n),
		})
	})
	if err != nil {
		return err
	}
	*m = n
	return nil
}

// objectName names a mapping in the audit log.
func objectName(m *Mapping) string { return fmt.Sprintf("%d %s", m.ID, errs.Clip(m.Domain)) }

// lock reads the mapping with id for update in tx.
func lock(ctx context.Context, tx *database.Tx, id int64) (*Mapping, error) {
	ms, err := selectRows(ctx, tx, selectMappings+` WHERE m.id = ? FOR UPDATE`, id)
	if err != nil {
		return nil, err
	}
	if len(ms) == 0 {
		return nil, notFound(id)
	}
	return ms[0], nil
}

// Update saves m over the mapping with m.ID. m.Version must be the version
// the caller read; a changed mapping gives an *errs.Stale. The app cannot
// change. On success m holds the stored mapping, its Version one higher.
func (s *Store) Update(ctx context.Context, actor audit.Actor, m *Mapping) error {
	if err := m.Validate(); err != nil {
		return err
	}
	entries, err := encodeEntries(m.Entries)
	if err != nil {
		return err
	}
	var saved Mapping
	err = database.InTx(ctx, s.db, func(tx *database.Tx) error {
		old, err := lock(ctx, tx, m.ID)
		if err != nil {
			return err
		}
		if err := old.CheckVersion(m.Version); err != nil {
			return err
		}
		if old.App != m.App {
			return errs.Invalid("app", "cannot be changed; create the mapping under the other app instead")
		}
		if err := checkBucket(ctx, tx, m.Bucket, m.App); err != nil {
			return err
		}
		saved = *old
		saved.Domain, saved.Entries, saved.Bucket = m.Domain, slices.Clone(m.Entries), m.Bucket
		saved.KeyFrom, saved.Description = m.KeyFrom, m.Description
		saved.Stamp = old.Stamp.Next(actor.User)
		_, err = tx.ExecContext(ctx, `UPDATE descriptor_mappings SET domain = ?, entries = ?, match_hash = ?, bucket = ?,
			key_from = ?, description = ?, version = ?, updated_by = ?, updated_at = ? WHERE id = ? AND version = ?`,
			saved.Domain, entries, saved.matchHash(), saved.Bucket, saved.KeyFrom, saved.Description, saved.Version,
			saved.UpdatedBy, saved.UpdatedAt, old.ID, old.Version)
		if database.IsDuplicate(err) {
			return duplicate(&saved)
		}
		if err != nil {
			return fmt.Errorf("update descriptor mapping %d: %w", m.ID, database.Translate(err))
		}
		if err := BumpRevision(ctx, tx); err != nil {
			return err
		}
		return audit.Write(ctx, tx, actor, audit.Entry{
			Action: "mapping.update", ObjectType: "mapping", ObjectName: objectName(&saved), App: saved.App,
			Before: audit.Snapshot(old), After: audit.Snapshot(saved),
		})
	})
	if err != nil {
		return err
	}
	*m = saved
	return nil
}

// Delete removes the mapping with id. version is the version the caller
// read, or 0 for whatever is stored; a stale one gives an *errs.Stale.
func (s *Store) Delete(ctx context.Context, actor audit.Actor, id, version int64) error {
	return database.InTx(ctx, s.db, func(tx *database.Tx) error {
		old, err := lock(ctx, tx, id)
		if err != nil {
			return err
		}
		if err := old.CheckVersion(version); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM descriptor_mappings WHERE id = ?`, id); err != nil {
			return fmt.Errorf("delete descriptor mapping %d: %w", id, database.Translate(err))
		}
		if err := BumpRevision(ctx, tx); err != nil {
			return err
		}
		return audit.Write(ctx, tx, actor, audit.Entry{
			Action: "mapping.delete", ObjectType: "mapping", ObjectName: objectName(old), App: old.App,
			Before: audit.Snapshot(old),
		})
	})
}
