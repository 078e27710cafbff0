package usage

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client/usage"
)

// benchBuckets is the scale of the console's measurements: 10,000 buckets.
const benchBuckets = 10_000

// BenchmarkRollUp measures what the sync worker spends, per minute, on the
// roll-up of 10,000 buckets all active in that minute, and what a console
// page then spends reading it: a page of 50 buckets (For) and the 25 that
// denied the most (TopDenied), on MariaDB. Redis commands per request of
// a page are 0 by construction; the roll-up's are reported per minute.
//
//	SLUICE_TEST_MYSQL_DSN=... SLUICE_TEST_REDIS_ADDR=... go test ./internal/usage -run XXX -bench RollUp -benchtime 200x
func BenchmarkRollUp(b *testing.B) {
	f := newRollFixture(b, 0)
	ctx := context.Background()
	m := f.now.Add(-time.Minute)
	names := make([]string, benchBuckets)
	rec, err := usage.NewRecorder(f.rdb, "web", usage.WithKeyPrefix(f.prefix), usage.WithFlushInterval(time.Hour))
	if err != nil {
		b.Fatal(err)
	}
	for i := range names {
		names[i] = fmt.Sprintf("bucket-%05d", i)
		rec.Add(names[i], m, true, int64(i%97+1))
		rec.Add(names[i], m, false, int64(i%13))
	}
	if err := rec.Close(); err != nil {
		b.Fatal(err)
	}
	// The first roll-up reads the whole last hour: 60 active sets and the
	// 10,000 minute hashes of the one active minute.
	start := time.Now()
	st, err := f.roller.RollUp(ctx)
	if err != nil {
		b.Fatal(err)
	}
	took := time.Since(start)
	cmds, maxPipe := f.cnt.take()
	b.Logf("roll-up of one minute with %d active buckets: %v, %d Redis commands (largest pipeline %d), %d rows written",
		benchBuckets, took.Round(time.Millisecond), cmds, maxPipe, st.Buckets)

	b.Run("page-of-50", func(b *testing.B) {
		page := names[5000:5050]
		for b.Loop() {
			got, err := f.recent.For(ctx, page)
			if err != nil || len(got) != 50 {
				b.Fatal(len(got), err)
			}
		}
		if cmds, _ := f.cnt.take(); cmds != 0 {
			b.Fatalf("%d Redis commands", cmds)
		}
	})
	b.Run("top-25-denied", func(b *testing.B) {
		for b.Loop() {
			got, err := f.recent.TopDenied(ctx, nil, 25)
			if err != nil || len(got) != 25 {
				b.Fatal(len(got), err)
			}
		}
	})
	b.Run("top-25-denied-among-500-visible", func(b *testing.B) {
		visible := names[:500]
		for b.Loop() {
			if _, err := f.recent.TopDenied(ctx, visible, 25); err != nil {
				b.Fatal(err)
			}
		}
	})
}
