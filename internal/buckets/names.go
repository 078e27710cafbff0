package buckets

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/sluicehq/sluice/internal/database"
)

// NamesContaining returns up to limit bucket names containing part, by
// name: a scan of the name index, cheap at tens of thousands of buckets.
// A visibleTo that is not nil keeps the buckets the members of those apps
// see (as Filter.VisibleTo does).
func (s *Store) NamesContaining(ctx context.Context, part string, visibleTo []string, limit int) ([]string, error) {
	names := []string{}
	f := Filter{Search: part, VisibleTo: visibleTo}
	if visibleTo != nil && len(visibleTo) == 0 {
		return names, nil
	}
	where, args := f.conditions()
	q, args, err := sqlx.In(`SELECT b.name FROM buckets b`+database.Where(where)+` ORDER BY b.name LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("bucket names: %w", err)
	}
	if err := s.db.SelectContext(ctx, &names, q, args...); err != nil {
		return nil, fmt.Errorf("bucket names: %w", database.Translate(err))
	}
	return names, nil
}

// Count returns how many buckets there are: a scan of the smallest index,
// without the joins and order of a list page.
func (s *Store) Count(ctx context.Context) (int, error) {
	var n int
	if err := s.db.GetContext(ctx, &n, `SELECT COUNT(*) FROM buckets`); err != nil {
		return 0, fmt.Errorf("count buckets: %w", database.Translate(err))
	}
	return n, nil
}

// ByNames returns the buckets of names that exist, in no order, each with
// its allowed apps: two queries however many names.
func (s *Store) ByNames(ctx context.Context, names []string) ([]*Bucket, error) {
	if len(names) == 0 {
		return []*Bucket{}, nil
	}
	q, args, err := sqlx.In(selectBuckets+` WHERE b.name IN (?)`, names)
	if err != nil {
		return nil, fmt.Errorf("buckets by name: %w", err)
	}
	bs, err := selectRows(ctx, s.db, q, args...)
	if err != nil {
		return nil, fmt.Errorf("buckets by name: %w", err)
	}
	if err := withApps(ctx, s.db, bs, false); err != nil {
		return nil, err
	}
	return bs, nil
}
