package buckets

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/database"
)

// Op is what a change event does to a bucket's Redis hash.
type Op string

// Change event operations.
const (
	// OpUpsert writes the bucket's current definition.
	OpUpsert Op = "upsert"
	// OpDelete removes the bucket.
	OpDelete Op = "delete"
	// OpOverrideUpsert writes the override's current definition into the
	// keyed bucket's Redis state.
	OpOverrideUpsert Op = "override_upsert"
	// OpOverrideDelete removes the override: its keys get the default
	// limit again (or a less specific override's).
	OpOverrideDelete Op = "override_delete"
)

// Event is one row of the outbox: a change for the sync worker, committed
// in the same transaction as the change. It names what changed and does
// not copy it: the worker reads the current definition when it applies an
// upsert (a newer one than the event's version is as good, and a row that
// is gone means a delete event follows), so a field added to a bucket
// never reaches the outbox.
//
// Version orders the events of one bucket: an upsert carries the version
// it saved, a delete the deleted version plus one, so a delete always wins
// over the upserts before it. A bucket re-created under the same name gets
// a new BucketID and starts again at version 1, so guards compare
// (BucketID, Version), not Version alone.
type Event struct {
	ID       int64  `json:"id"`
	BucketID int64  `json:"bucket_id"`
	Name     string `json:"name"`
	Op       Op     `json:"op"`
	Version  int64  `json:"version"`
	// Keyed is set for every event of a keyed bucket: it says which Redis
	// state a delete removes.
	Keyed bool `json:"keyed"`
	// Override names the override of OpOverrideUpsert and OpOverrideDelete
	// events, whose Version is the override's; nil for bucket events.
	Override  *OverrideRef `json:"override,omitempty"`
	CreatedAt time.Time    `json:"created_at"`
}

// OverrideRef names an override in an event: its id and the keys it
// covers, which are fixed at creation and which removing its Redis state
// needs once its row is gone. An override is never re-created under its
// ID, so guards compare (ID, Version).
type OverrideRef struct {
	ID    int64  `json:"id"`
	Match Match  `json:"match"`
	Key   string `json:"key"`
}

// Event page sizes of PendingEvents.
const (
	DefaultEventLimit = 100
	MaxEventLimit     = 10000
)

// writeEvent records a change of bucket b, of the given version.
func writeEvent(ctx context.Context, tx *database.Tx, op Op, b *Bucket, version int64) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO bucket_events (bucket_id, bucket_name, op, version, keyed, created_at)
		VALUES (?, ?, ?, ?, ?, ?)`, b.ID, b.Name, string(op), version, b.Keyed, tx.Now()); err != nil {
		return fmt.Errorf("write change event of %q: %w", b.Name, database.Translate(err))
	}
	return nil
}

// writeOverrideEvent records a change of override o of keyed bucket b.
func writeOverrideEvent(ctx context.Context, tx *database.Tx, op Op, b *Bucket, o *Override, version int64) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO bucket_events (bucket_id, bucket_name, op, version, keyed,
		override_id, override_match, override_key, created_at) VALUES (?, ?, ?, ?, TRUE, ?, ?, ?, ?)`,
		b.ID, b.Name, string(op), version, o.ID, string(o.Match), []byte(o.Key), tx.Now()); err != nil {
		return fmt.Errorf("write change event of an override of %q: %w", b.Name, database.Translate(err))
	}
	return nil
}

type eventRow struct {
	ID         int64     `db:"id"`
	BucketID   int64     `db:"bucket_id"`
	Name       string    `db:"bucket_name"`
	Op         string    `db:"op"`
	Version    int64     `db:"version"`
	Keyed      bool      `db:"keyed"`
	OverrideID int64     `db:"override_id"`
	Match      string    `db:"override_match"`
	Key        []byte    `db:"override_key"`
	CreatedAt  time.Time `db:"created_at"`
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
	if err := s.db.SelectContext(ctx, &rows, `SELECT id, bucket_id, bucket_name, op, version, keyed, override_id,
		override_match, override_key, created_at FROM bucket_events ORDER BY id LIMIT ?`, limit); err != nil {
		return nil, fmt.Errorf("read change events: %w", database.Translate(err))
	}
	out := make([]Event, 0, len(rows))
	for _, r := range rows {
		e := Event{ID: r.ID, BucketID: r.BucketID, Name: r.Name, Op: Op(r.Op), Version: r.Version, Keyed: r.Keyed,
			CreatedAt: r.CreatedAt}
		if r.OverrideID != 0 {
			e.Override = &OverrideRef{ID: r.OverrideID, Match: Match(r.Match), Key: string(r.Key)}
		}
		out = append(out, e)
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
