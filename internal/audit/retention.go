package audit

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/periodic"
)

// DefaultRetention is how long audit entries are kept unless configured
// otherwise: a little over a year, so that last year's events can be
// compared with this year's.
const DefaultRetention = 400 * 24 * time.Hour

// purgeBatch bounds the rows one DELETE removes: small batches keep each
// transaction short, so that writers of new entries never wait long.
const purgeBatch = 5000

// PurgeInterval is how often RunRetention purges.
const PurgeInterval = time.Hour

// Purge deletes the entries written before cutoff, in batches, and returns
// how many. It can run on several instances at once.
func (s *Store) Purge(ctx context.Context, cutoff time.Time) (int64, error) {
	var total int64
	for {
		n, err := database.ExecCount(ctx, s.db, `DELETE FROM audit_log WHERE at < ? ORDER BY at LIMIT ?`,
			cutoff.UTC(), purgeBatch)
		if err != nil {
			return total, fmt.Errorf("purge audit log: %w", err)
		}
		total += n
		if n < purgeBatch {
			return total, nil
		}
		if err := ctx.Err(); err != nil {
			return total, err
		}
	}
}

// RunRetention purges entries older than keep at once and then every
// PurgeInterval, until ctx ends. A keep of zero or less keeps everything:
// RunRetention returns at once.
func (s *Store) RunRetention(ctx context.Context, keep time.Duration, log *slog.Logger) {
	if keep <= 0 {
		return
	}
	periodic.NowAndEvery(ctx, PurgeInterval, func(ctx context.Context) {
		if n, err := s.Purge(ctx, time.Now().Add(-keep)); err != nil && ctx.Err() == nil {
			log.WarnContext(ctx, "audit: purge of old entries failed; retrying later", "err", err)
		} else if n > 0 {
			log.InfoContext(ctx, "audit: purged old entries", "count", n, "older_than", keep.String())
		}
	})
}
