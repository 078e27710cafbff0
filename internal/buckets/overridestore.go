package buckets

import (
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/redisscript/names"
)

// OverrideFilter selects overrides of one bucket for ListOverrides.
type OverrideFilter struct {
	// Search keeps overrides whose key starts with it (byte for byte, so
	// case-sensitive; '%' and '_' match only themselves). A prefix rather
	// than a substring: it is answered from the index, however many
	// overrides the bucket has.
	Search string
	// Match keeps only exact or only prefix overrides; "" keeps both.
	Match Match
	// After is the cursor: OverridePage.Next of the previous page.
	After string
	// Limit is the page size: DefaultLimit when 0, at most MaxLimit.
	Limit int
}

// OverridePage is one page of overrides ordered by key (then match).
type OverridePage struct {
	Overrides []*Override `json:"overrides"`
	// Next is the opaque cursor of the next page, "" on the last one.
	Next string `json:"next,omitempty"`
	// Total counts every override the filter selects, on all pages.
	Total int `json:"total"`
}

type overrideRow struct {
	ID          int64  `db:"id"`
	BucketID    int64  `db:"bucket_id"`
	Match       string `db:"match_kind"`
	Key         []byte `db:"override_key"`
	Description string `db:"description"`
	MaxPermits  int64  `db:"max_permits"`
	RatePermits string `db:"rate_permits"`
	RatePeriod  int64  `db:"rate_period_seconds"`
	Shadow      bool   `db:"shadow"`
	database.Stamp
}

const selectOverrides = `SELECT id, bucket_id, match_kind, override_key, description, max_permits, rate_permits,
	rate_period_seconds, shadow, version, created_by, updated_by, created_at, updated_at FROM bucket_overrides`

func (r *overrideRow) override(bucket string) (*Override, error) {
	rate, err := storedRate(r.RatePermits, r.RatePeriod)
	if err != nil {
		return nil, fmt.Errorf("override %d of %q: %w", r.ID, bucket, err)
	}
	return &Override{
		ID: r.ID, Bucket: bucket, Match: Match(r.Match), Key: string(r.Key), Description: r.Description,
		MaxPermits: r.MaxPermits, Rate: rate, Shadow: r.Shadow, Stamp: r.Stamp,
	}, nil
}

func selectOverrideRows(ctx context.Context, q sqlx.QueryerContext, bucket string, query string, args ...any) ([]*Override, error) {
	return database.SelectAll(ctx, q, func(r *overrideRow) (*Override, error) { return r.override(bucket) }, query, args...)
}

func overrideNotFound(bucket string, id int64) error {
	return fmt.Errorf("override %d of bucket %q: %w", id, bucket, errs.ErrNotFound)
}

// notKeyed is the error for overrides of a bucket that is not keyed.
func notKeyed(name string) error {
	return errs.Invalid("bucket", fmt.Sprintf("%q is not a keyed bucket; only keyed buckets have overrides", name))
}

// lockKeyed locks the keyed bucket named name in tx: override changes take
// the bucket's row lock, so that a bucket's events (its own and its
// overrides') are written in commit order.
func lockKeyed(ctx context.Context, tx *database.Tx, name string) (*Bucket, error) {
	b, err := lock(ctx, tx, name)
	if err != nil {
		return nil, err
	}
	if !b.Keyed {
		return nil, notKeyed(name)
	}
	return b, nil
}

// lockOverride takes the row lock of override id, which must belong to
// bucket b, and returns it as committed.
func lockOverride(ctx context.Context, tx *database.Tx, b *Bucket, id int64) (*Override, error) {
	// A locking read returns the latest saved row, not the snapshot of an
	// earlier read in tx, so the version checked is the version replaced
	// even for a writer that did not take the bucket's lock first.
	os, err := selectOverrideRows(ctx, tx, b.Name, selectOverrides+` WHERE id = ? AND bucket_id = ? FOR UPDATE`, id, b.ID)
	if err != nil {
		return nil, fmt.Errorf("lock override %d of %q: %w", id, b.Name, err)
	}
	if len(os) == 0 {
		return nil, overrideNotFound(b.Name, id)
	}
	return os[0], nil
}

// overrideAudit is the audited form of an override.
func overrideAudit(action string, b *Bucket, before, after *Override) audit.Entry {
	e := audit.Entry{Action: action, ObjectType: "override", ObjectName: b.Name, App: b.OwnerApp}
	if before != nil {
		e.Before = audit.Snapshot(before)
	}
	if after != nil {
		e.After = audit.Snapshot(after)
	}
	return e
}

// recordOverrideChange writes the outbox event and the audit row of override n of
// bucket b, created (old is nil) or updated from old, in the transaction
// that saved it.
func recordOverrideChange(ctx context.Context, tx *database.Tx, actor audit.Actor, b *Bucket, old, n *Override) error {
	if err := writeOverrideEvent(ctx, tx, OpOverrideUpsert, b, n, n.Version); err != nil {
		return err
	}
	action := "override.create"
	if old != nil {
		action = "override.update"
	}
	return audit.Write(ctx, tx, actor, overrideAudit(action, b, old, n))
}

// CreateOverride saves a new override of the keyed bucket o.Bucket,
// setting its ID, Version (1), timestamps and authors. An override with
// the same match and key gives an error matching errs.ErrConflict; a
// bucket that is not keyed, or a prefix past MaxPrefixOverrides, a
// *errs.Validation.
func (s *Store) CreateOverride(ctx context.Context, actor audit.Actor, o *Override) error {
	if err := o.Validate(); err != nil {
		return err
	}
	n := *o
	n.Stamp = database.NewStamp(actor.User)
	err := database.InTx(ctx, s.db, func(tx *database.Tx) error {
		b, err := lockKeyed(ctx, tx, n.Bucket)
		if err != nil {
			return err
		}
		// The bucket's kind decides whether the override has a rate.
		n.Kind = b.Kind
		if err := n.Validate(); err != nil {
			return err
		}
		if n.Match == MatchPrefix {
			var count int
			if err := tx.GetContext(ctx, &count, `SELECT COUNT(*) FROM bucket_overrides WHERE bucket_id = ? AND match_kind = ?`,
				b.ID, string(MatchPrefix)); err != nil {
				return fmt.Errorf("count prefix overrides of %q: %w", b.Name, database.Translate(err))
			}
			if count >= MaxPrefixOverrides {
				return errs.Invalid("match", fmt.Sprintf("bucket %q already has %d prefix overrides, the most allowed; use exact overrides or fewer, shorter prefixes",
					b.Name, MaxPrefixOverrides))
			}
		}
		id, err := database.Insert(ctx, tx, `INSERT INTO bucket_overrides (bucket_id, match_kind, override_key, description,
			max_permits, rate_permits, rate_period_seconds, shadow, version, created_by, created_at, updated_by, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			b.ID, string(n.Match), []byte(n.Key), n.Description, n.MaxPermits, n.Rate.Permits(), n.Rate.PeriodSeconds(),
			n.Shadow, n.Version, n.CreatedBy, n.CreatedAt, n.UpdatedBy, n.UpdatedAt)
		if database.IsDuplicate(err) {
			return errs.Conflictf("bucket %q already has an %s override for %q", b.Name, n.Match, errs.Clip(n.Key))
		}
		if err != nil {
			return fmt.Errorf("insert override of %q: %w", b.Name, err)
		}
		n.ID = id
		return recordOverrideChange(ctx, tx, actor, b, nil, &n)
	})
	if err != nil {
		return err
	}
	*o = n
	return nil
}

// UpdateOverride saves the description and limit of override o.ID of
// bucket o.Bucket. o.Version must be the version the caller read, else
// nothing changes and the error is an *errs.Stale. Match and key are kept
// as stored (Override.CheckFixed, which the application layer checks). On success o holds the stored override, its Version one higher.
func (s *Store) UpdateOverride(ctx context.Context, actor audit.Actor, o *Override) error {
	if err := o.Validate(); err != nil {
		return err
	}
	var saved Override
	err := database.InTx(ctx, s.db, func(tx *database.Tx) error {
		b, err := lockKeyed(ctx, tx, o.Bucket)
		if err != nil {
			return err
		}
		// The bucket's kind decides whether the override has a rate.
		o.Kind = b.Kind
		if err := o.Validate(); err != nil {
			return err
		}
		old, err := lockOverride(ctx, tx, b, o.ID)
		if err != nil {
			return err
		}
		if err := old.CheckVersion(o.Version); err != nil {
			return err
		}
		saved = *old
		saved.Description, saved.MaxPermits, saved.Rate, saved.Shadow = o.Description, o.MaxPermits, o.Rate, o.Shadow
		saved.Stamp = old.Stamp.Next(actor.User)
		if _, err := tx.ExecContext(ctx, `UPDATE bucket_overrides SET description = ?, max_permits = ?, rate_permits = ?,
			rate_period_seconds = ?, shadow = ?, version = ?, updated_by = ?, updated_at = ? WHERE id = ? AND version = ?`,
			saved.Description, saved.MaxPermits, saved.Rate.Permits(), saved.Rate.PeriodSeconds(), saved.Shadow, saved.Version,
			saved.UpdatedBy, saved.UpdatedAt, old.ID, old.Version); err != nil {
			return fmt.Errorf("update override %d of %q: %w", old.ID, b.Name, database.Translate(err))
		}
		return recordOverrideChange(ctx, tx, actor, b, old, &saved)
	})
	if err != nil {
		return err
	}
	*o = saved
	return nil
}

// DeleteOverride removes override id of bucket. version is the version the
// caller read, or 0 for whatever is stored; a stale one gives an
// *errs.Stale and deletes nothing. The keys of the override
// get the bucket's limit again (or a less specific override's).
func (s *Store) DeleteOverride(ctx context.Context, actor audit.Actor, bucket string, id, version int64) error {
	return database.InTx(ctx, s.db, func(tx *database.Tx) error {
		b, err := lockKeyed(ctx, tx, bucket)
		if err != nil {
			return err
		}
		old, err := lockOverride(ctx, tx, b, id)
		if err != nil {
			return err
		}
		if err := old.CheckVersion(version); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM bucket_overrides WHERE id = ?`, old.ID); err != nil {
			return fmt.Errorf("delete override %d of %q: %w", old.ID, b.Name, database.Translate(err))
		}
		if err := writeOverrideEvent(ctx, tx, OpOverrideDelete, b, old, old.Version+1); err != nil {
			return err
		}
		return audit.Write(ctx, tx, actor, overrideAudit("override.delete", b, old, nil))
	})
}

// GetOverride returns override id of bucket, or an error matching
// errs.ErrNotFound.
func (s *Store) GetOverride(ctx context.Context, bucket string, id int64) (*Override, error) {
	b, err := s.Get(ctx, bucket)
	if err != nil {
		return nil, err
	}
	os, err := selectOverrideRows(ctx, s.db, b.Name, selectOverrides+` WHERE id = ? AND bucket_id = ?`, id, b.ID)
	if err != nil {
		return nil, fmt.Errorf("get override %d of %q: %w", id, bucket, err)
	}
	if len(os) == 0 {
		return nil, overrideNotFound(bucket, id)
	}
	return os[0], nil
}

// EffectiveOverride returns the override that applies to key in keyed
// bucket bucket (exact, else the longest matching prefix), or nil when
// the key gets the bucket's own limit. It reads at most two index ranges,
// whatever the number of overrides.
func (s *Store) EffectiveOverride(ctx context.Context, bucket, key string) (*Override, error) {
	b, err := s.Get(ctx, bucket)
	if err != nil {
		return nil, err
	}
	if !b.Keyed {
		return nil, notKeyed(bucket)
	}
	if key == "" || len(key) > MaxKeyLength {
		return nil, nil
	}
	os, err := selectOverrideRows(ctx, s.db, b.Name, selectOverrides+` WHERE bucket_id = ? AND override_key = ?
		AND match_kind = ?`, b.ID, []byte(key), string(MatchExact))
	if err != nil {
		return nil, fmt.Errorf("match overrides of %q: %w", bucket, err)
	}
	if len(os) > 0 {
		return os[0], nil
	}
	// Every prefix of key is a candidate; the unique key answers each.
	cands := make([]any, 0, len(key))
	for i := len(key); i >= 1; i-- {
		cands = append(cands, []byte(key[:i]))
	}
	q, args, err := sqlx.In(selectOverrides+` WHERE bucket_id = ? AND match_kind = ? AND override_key IN (?)
		ORDER BY LENGTH(override_key) DESC LIMIT 1`, b.ID, string(MatchPrefix), cands)
	if err != nil {
		return nil, fmt.Errorf("match overrides of %q: %w", bucket, err)
	}
	os, err = selectOverrideRows(ctx, s.db, b.Name, q, args...)
	if err != nil {
		return nil, fmt.Errorf("match overrides of %q: %w", bucket, err)
	}
	if len(os) > 0 {
		return os[0], nil
	}
	return nil, nil
}

// overrideCursor encodes the position after o: its match and key.
func overrideCursor(o *Override) string {
	return base64.RawURLEncoding.EncodeToString([]byte(string(o.Match[0]) + o.Key))
}

func parseOverrideCursor(s string) (key []byte, match Match, ok bool) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(raw) < 2 {
		return nil, "", false
	}
	switch raw[0] {
	case 'e':
		match = MatchExact
	case 'p':
		match = MatchPrefix
	default:
		return nil, "", false
	}
	return raw[1:], match, true
}

// ListOverrides returns one page of the overrides of keyed bucket bucket
// that f selects, ordered by key and then match. Every query runs on the
// index (bucket, key, match), so paging and prefix search stay fast with
// hundreds of thousands of overrides.
func (s *Store) ListOverrides(ctx context.Context, bucket string, f OverrideFilter) (OverridePage, error) {
	b, err := s.Get(ctx, bucket)
	if err != nil {
		return OverridePage{}, err
	}
	if !b.Keyed {
		return OverridePage{}, notKeyed(bucket)
	}
	limit := database.PageSize(f.Limit)
	empty := OverridePage{Overrides: []*Override{}}
	if len(f.Search) > MaxKeyLength || (f.Match != "" && f.Match != MatchExact && f.Match != MatchPrefix) {
		return empty, nil
	}
	where := []string{`bucket_id = ?`}
	args := []any{b.ID}
	if f.Search != "" {
		where = append(where, `override_key LIKE ? ESCAPE '!'`)
		args = append(args, []byte(database.LikePrefix(f.Search)))
	}
	if f.Match != "" {
		where = append(where, `match_kind = ?`)
		args = append(args, string(f.Match))
	}
	var page OverridePage
	if err := s.db.GetContext(ctx, &page.Total, `SELECT COUNT(*) FROM bucket_overrides WHERE `+strings.Join(where, " AND "),
		args...); err != nil {
		return OverridePage{}, fmt.Errorf("count overrides of %q: %w", bucket, database.Translate(err))
	}
	if f.After != "" {
		key, match, ok := parseOverrideCursor(f.After)
		if !ok {
			return OverridePage{}, errs.Invalid("after", "is not a cursor this list returned")
		}
		where = append(where, `(override_key > ? OR (override_key = ? AND match_kind > ?))`)
		args = append(args, key, key, string(match))
	}
	args = append(args, limit+1)
	os, err := selectOverrideRows(ctx, s.db, b.Name, selectOverrides+` WHERE `+strings.Join(where, " AND ")+
		` ORDER BY override_key, match_kind LIMIT ?`, args...)
	if err != nil {
		return OverridePage{}, fmt.Errorf("list overrides of %q: %w", bucket, err)
	}
	if len(os) > limit {
		os = os[:limit]
		page.Next = overrideCursor(os[limit-1])
	}
	page.Overrides = os
	return page, nil
}

// OverrideDefinitions calls fn with every override of the keyed bucket
// whose id is bucketID, in id order, reading pages of batch rows, for the
// sync worker's reconcile. It is not one snapshot: the reconcile re-checks
// what looks wrong.
func (s *Store) OverrideDefinitions(ctx context.Context, bucketID int64, batch int, fn func([]*Override) error) error {
	if batch <= 0 {
		batch = 5000
	}
	var bucket string
	if err := s.db.GetContext(ctx, &bucket, `SELECT name FROM buckets WHERE id = ?`, bucketID); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		return fmt.Errorf("load overrides of bucket %d: %w", bucketID, database.Translate(err))
	}
	after := int64(0)
	for {
		os, err := selectOverrideRows(ctx, s.db, bucket, selectOverrides+` WHERE bucket_id = ? AND id > ? ORDER BY id LIMIT ?`,
			bucketID, after, batch)
		if err != nil {
			return fmt.Errorf("load overrides of %q: %w", bucket, err)
		}
		if len(os) == 0 {
			return nil
		}
		if err := fn(os); err != nil {
			return err
		}
		if len(os) < batch {
			return nil
		}
		after = os[len(os)-1].ID
	}
}

// WithOverrides calls fn with the bucket named bucket and those of the
// overrides ids that it still has, as committed, and holds a shared lock
// on the bucket's row until fn returns: override changes take that lock,
// so none of them (nor a delete of the bucket) commits before. b is nil
// when the bucket is gone or is not keyed. As for WithDefinition, fn
// should be brief and must not use the store.
func (s *Store) WithOverrides(ctx context.Context, bucket string, ids []int64, fn func(b *Bucket, os []*Override) error) error {
	if !names.Valid(bucket) {
		return fn(nil, nil)
	}
	return database.InTx(ctx, s.db, func(tx *database.Tx) error {
		bs, err := lockShared(ctx, tx, []string{bucket})
		if err != nil {
			return err
		}
		if len(bs) == 0 || !bs[0].Keyed {
			return fn(nil, nil)
		}
		b := bs[0]
		if len(ids) == 0 {
			return fn(b, nil)
		}
		q, args, err := sqlx.In(selectOverrides+` WHERE bucket_id = ? AND id IN (?) ORDER BY id`, b.ID, ids)
		if err != nil {
			return fmt.Errorf("load overrides of %q: %w", b.Name, err)
		}
		os, err := selectOverrideRows(ctx, tx, b.Name, tx.Rebind(q), args...)
		if err != nil {
			return fmt.Errorf("load overrides of %q: %w", b.Name, err)
		}
		return fn(b, os)
	})
}

// OverrideByID returns the override with id, for the sync worker's
// re-checks; an error matching errs.ErrNotFound means it is gone.
func (s *Store) OverrideByID(ctx context.Context, id int64) (*Override, error) {
	var bucket string
	err := s.db.GetContext(ctx, &bucket, `SELECT b.name FROM bucket_overrides o JOIN buckets b ON b.id = o.bucket_id
		WHERE o.id = ?`, id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("override %d: %w", id, errs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get override %d: %w", id, database.Translate(err))
	}
	os, err := selectOverrideRows(ctx, s.db, bucket, selectOverrides+` WHERE id = ?`, id)
	if err != nil {
		return nil, fmt.Errorf("get override %d: %w", id, err)
	}
	if len(os) == 0 {
		return nil, fmt.Errorf("override %d: %w", id, errs.ErrNotFound)
	}
	return os[0], nil
}
