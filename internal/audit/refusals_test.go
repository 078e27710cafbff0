package audit_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/testenv"
)

type counter struct{ n atomic.Int64 }

func (c *counter) Inc() { c.n.Add(1) }

// TestRefusalsSampled: 600 refused requests without sign-in are all
// counted, but write at most Sample rows per interval plus one summary
// row that says how many more there were.
func TestRefusalsSampled(t *testing.T) {
	ctx := context.Background()
	db := testenv.MySQL(t)
	var mu sync.Mutex
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	c := &counter{}
	r := audit.NewRefusals(db)
	r.Sample, r.Interval, r.Counter, r.Now = 10, time.Minute, c, clock
	anon := audit.Actor{User: "anonymous", Via: "api", Addr: "198.51.100.9"}
	rows := func() int {
		t.Helper()
		var n int
		if err := db.GetContext(ctx, &n, `SELECT COUNT(*) FROM audit_log`); err != nil {
			t.Fatal(err)
		}
		return n
	}

	var wg sync.WaitGroup
	for w := range 6 {
		wg.Go(func() {
			for i := range 100 {
				if err := r.Record(ctx, anon, audit.Entry{ObjectType: "route", Detail: "GET /api/v1/buckets: no credentials"}); err != nil {
					t.Errorf("worker %d, refusal %d: %v", w, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if got := rows(); got != 10 {
		t.Fatalf("600 refusals in one interval wrote %d rows, want 10", got)
	}
	if r.Total() != 600 || c.n.Load() != 600 {
		t.Fatalf("counted %d (metric %d), want 600", r.Total(), c.n.Load())
	}

	// The next interval's first refusal writes the summary and itself.
	advance(time.Minute)
	if err := r.Record(ctx, anon, audit.Entry{ObjectType: "route"}); err != nil {
		t.Fatal(err)
	}
	if got := rows(); got != 12 {
		t.Fatalf("rows after the interval = %d, want 12", got)
	}
	page, err := audit.NewStore(db).List(ctx, audit.Filter{Action: "access.denied", Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	var summary audit.Entry
	for _, e := range page.Entries {
		if strings.Contains(e.Detail, "more refused") {
			summary = e
		}
	}
	if !strings.Contains(summary.Detail, "590 more refused requests") || summary.Actor != "anonymous (api)" {
		t.Fatalf("summary row = %+v", summary)
	}

	// A burst followed by silence: Flush writes the summary.
	for range 15 {
		if err := r.Record(ctx, anon, audit.Entry{ObjectType: "route"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rows(); got != 21 {
		t.Fatalf("rows before the interval ended = %d, want 21 (nothing flushed early)", got)
	}
	advance(2 * time.Minute)
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rows(); got != 22 {
		t.Fatalf("rows after Flush = %d, want 22", got)
	}
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rows(); got != 22 {
		t.Fatalf("a second Flush wrote again: %d rows", got)
	}
}

// TestPurge: entries older than the cutoff go, in batches; newer stay.
func TestPurge(t *testing.T) {
	ctx := context.Background()
	db := testenv.MySQL(t)
	cutoff := time.Now().UTC().Add(-audit.DefaultRetention)
	// 12,000 old rows (more than one batch) and a few fresh ones.
	if _, err := db.ExecContext(ctx, `INSERT INTO audit_log (at, actor, action, object_type)
		SELECT ? - INTERVAL seq SECOND, 'alice', 'bucket.update', 'bucket' FROM seq_1_to_12000`, cutoff); err != nil {
		t.Fatal(err)
	}
	for _, at := range []time.Time{cutoff.Add(time.Second), time.Now().UTC()} {
		if err := audit.Write(ctx, db, audit.Actor{User: "bob"}, audit.Entry{At: at, Action: "login.success", ObjectType: "user"}); err != nil {
			t.Fatal(err)
		}
	}
	n, err := audit.NewStore(db).Purge(ctx, cutoff)
	if err != nil || n != 12000 {
		t.Fatalf("Purge = %d, %v; want 12000", n, err)
	}
	var left []string
	if err := db.SelectContext(ctx, &left, `SELECT actor FROM audit_log`); err != nil {
		t.Fatal(err)
	}
	if len(left) != 2 || left[0] != "bob" || left[1] != "bob" {
		t.Fatalf("left after purge: %v", left)
	}
}
