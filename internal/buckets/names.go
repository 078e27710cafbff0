package buckets

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/internal/database"
)

// NamesContaining returns up to limit bucket names containing part, by
// name: a scan of the name index, cheap at tens of thousands of buckets.
func (s *Store) NamesContaining(ctx context.Context, part string, limit int) ([]string, error) {
	names := []string{}
	err := s.db.SelectContext(ctx, &names, `SELECT name FROM buckets WHERE name LIKE ? ESCAPE '!' ORDER BY name LIMIT ?`,
		database.LikeContains(part), limit)
	if err != nil {
		return nil, fmt.Errorf("bucket names: %w", database.Translate(err))
	}
	return names, nil
}
