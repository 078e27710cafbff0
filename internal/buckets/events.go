package buckets

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/sluicehq/sluice/internal/database"
)

// Op is what a change event does to a bucket's Redis hash.
type Op string

// Change event operations.
const (
	// OpUpsert writes the definition carried by the event.
	OpUpsert Op = "upsert"
	// OpDelete removes the bucket.
	OpDelete Op = "delete"
	// OpOverrideUpsert writes the override carried by the event into the
	// keyed bucket's Redis state.
	OpOverrideUpsert Op = "override_upsert"
	// OpOverrideDelete removes the override: its keys get the default
	// limit again (or a less specific override's).
	OpOverrideDelete Op = "override_delete"
)

// Event is one row of the outbox: a bucket change for the sync worker,
// committed in the same transaction as the change. It carries the whole
// definition, so applying it needs no further read.
//
// Version orders the events of one bucket: an upsert carries the version
// it saved, a delete the deleted version plus one, so a delete always wins
// over the upserts before it. A bucket re-created under the same name gets
// a new BucketID and starts again at version 1, so guards compare
// (BucketID, Version), not Version alone.
type Event struct {
	ID          int64    `json:"id"`
	BucketID    int64    `json:"bucket_id"`
	Name        string   `json:"name"`
	Op          Op       `json:"op"`
	Version     int64    `json:"version"`
	MaxPermits  int64    `json:"max_permits"`
	Rate        Rate     `json:"rate"`
	AllowedApps []string `json:"allowed_apps"`
	// Keyed is set for every event of a keyed bucket.
	Keyed       bool  `json:"keyed"`
	Shadow      bool  `json:"shadow"`
	LeaseMillis int64 `json:"lease_ms"`
	// Override events name the override (ID, match and key); Version is
	// then the override's version, MaxPermits, Rate and Shadow its limit, and
	// AllowedApps is empty. An override is never re-created under its ID,
	// so guards compare (OverrideID, Version).
	OverrideID    int64     `json:"override_id,omitempty"`
	OverrideMatch Match     `json:"override_match,omitempty"`
	OverrideKey   string    `json:"override_key,omitempty"`
	CreatedAt     time.Time `json:"created_at"`
}

// Event page sizes of PendingEvents.
const (
	DefaultEventLimit = 100
	MaxEventLimit     = 10000
)

func writeEvent(ctx context.Context, tx *sqlx.Tx, op Op, b *Bucket, version int64) error {
	apps, err := json.Marshal(b.AllowedApps)
	if err != nil {
		return fmt.Errorf("encode allowed apps: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO bucket_events (bucket_id, bucket_name, op, version, max_permits,
		rate_permits, rate_period_seconds, allowed_apps, keyed, shadow, lease_ms, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		b.ID, b.Name, string(op), version, b.MaxPermits, b.Rate.Permits(), b.Rate.PeriodSeconds(),
		string(apps), b.Keyed, b.Shadow, b.LeaseMillis, database.Now()); err != nil {
		return fmt.Errorf("write change event of %q: %w", b.Name, database.Translate(err))
	}
	return nil
}

// writeOverrideEvent records a change of override o of keyed bucket b.
func writeOverrideEvent(ctx context.Context, tx *sqlx.Tx, op Op, b *Bucket, o *Override, version int64) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO bucket_events (bucket_id, bucket_name, op, version, max_permits,
		rate_permits, rate_period_seconds, allowed_apps, keyed, shadow, override_id, override_match, override_key, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, '[]', TRUE, ?, ?, ?, ?, ?)`,
		b.ID, b.Name, string(op), version, o.MaxPermits, o.Rate.Permits(), o.Rate.PeriodSeconds(),
		o.Shadow, o.ID, string(o.Match), []byte(o.Key), database.Now()); err != nil {
		return fmt.Errorf("write change event of an override of %q: %w", b.Name, database.Translate(err))
	}
	return nil
}

type eventRow struct {
	ID          int64     `db:"id"`
	BucketID    int64     `db:"bucket_id"`
	Name        string    `db:"bucket_name"`
	Op          string    `db:"op"`
	Version     int64     `db:"version"`
	MaxPermits  int64     `db:"max_permits"`
	RatePermits string    `db:"rate_permits"`
	RatePeriod  int64     `db:"rate_period_seconds"`
	AllowedApps string    `db:"allowed_apps"`
	Keyed       bool      `db:"keyed"`
	OverrideID  int64     `db:"override_id"`
	Match       string    `db:"override_match"`
	Key         []byte    `db:"override_key"`
	Shadow      bool      `db:"shadow"`
	LeaseMillis int64     `db:"lease_ms"`
	CreatedAt   time.Time `db:"created_at"`
}

// PendingEvents returns up to limit unacknowledged change events, oldest
// (lowest ID) first. limit is DefaultEventLimit when 0, at most
// MaxEventLimit. Delivery is at least once: an event stays pending until
// AckEvents removes it, so appliers must be idempotent.
//
// IDs are assigned at insert, not at commit, so an event with a lower ID
// may become visible after higher ones were read and acknowledged; it is
// returned by the next call. The events of one bucket are never reordered
// this way: each mutation holds the bucket's row lock until it commits.
func (s *Store) PendingEvents(ctx context.Context, limit int) ([]Event, error) {
	if limit <= 0 {
		limit = DefaultEventLimit
	}
	limit = min(limit, MaxEventLimit)
	var rows []eventRow
	if err := s.db.SelectContext(ctx, &rows, `SELECT id, bucket_id, bucket_name, op, version, max_permits,
		rate_permits, rate_period_seconds, allowed_apps, keyed, shadow, lease_ms, override_id, override_match, override_key, created_at
		FROM bucket_events ORDER BY id LIMIT ?`, limit); err != nil {
		return nil, fmt.Errorf("read change events: %w", database.Translate(err))
	}
	out := make([]Event, 0, len(rows))
	for _, r := range rows {
		rate, err := storedRate(r.RatePermits, r.RatePeriod)
		if err != nil {
			return nil, fmt.Errorf("change event %d: %w", r.ID, err)
		}
		var apps []string
		if err := json.Unmarshal([]byte(r.AllowedApps), &apps); err != nil {
			return nil, fmt.Errorf("change event %d: decode allowed apps: %w", r.ID, err)
		}
		out = append(out, Event{
			ID: r.ID, BucketID: r.BucketID, Name: r.Name, Op: Op(r.Op), Version: r.Version,
			MaxPermits: r.MaxPermits, Rate: rate, AllowedApps: apps, Keyed: r.Keyed, Shadow: r.Shadow, LeaseMillis: r.LeaseMillis,
			OverrideID: r.OverrideID, OverrideMatch: Match(r.Match), OverrideKey: string(r.Key), CreatedAt: r.CreatedAt,
		})
	}
	return out, nil
}

// AckEvents deletes the change events with the given ids, once applied.
// Acknowledging an id twice, or one that does not exist, is not an error.
func (s *Store) AckEvents(ctx context.Context, ids []int64) error {
	const chunk = 1000
	for len(ids) > 0 {
		n := min(len(ids), chunk)
		args := make([]any, n)
		for i, id := range ids[:n] {
			args[i] = id
		}
		query := `DELETE FROM bucket_events WHERE id IN (` + strings.TrimSuffix(strings.Repeat("?,", n), ",") + `)`
		if _, err := s.db.ExecContext(ctx, query, args...); err != nil {
			return fmt.Errorf("acknowledge change events: %w", database.Translate(err))
		}
		ids = ids[n:]
	}
	return nil
}
