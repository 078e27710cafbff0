package audit_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/devdb"
	"github.com/sluicehq/sluice/migrations"
)

// TestEmbeddedEngine runs writing, listing per app, sampling and purging
// on the in-process engine of -dev mode.
func TestEmbeddedEngine(t *testing.T) {
	ctx := context.Background()
	dsn, stop, err := devdb.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	if err := migrations.Up(dsn); err != nil {
		t.Fatal(err)
	}
	db, err := database.Open(ctx, dsn, database.Options{MaxOpenConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	old := time.Now().UTC().Add(-2 * audit.DefaultRetention)
	for i, app := range []string{"shop", "pay", "shop", "mail"} {
		e := audit.Entry{Action: "bucket.update", ObjectType: "bucket", ObjectName: "b", App: app}
		if i == 0 {
			e.At = old
		}
		if err := audit.Write(ctx, db, audit.Actor{User: "alice", Via: "api"}, e); err != nil {
			t.Fatal(err)
		}
	}
	s := audit.NewStore(db)
	page, err := s.List(ctx, audit.Filter{Apps: []string{"shop", "pay"}, Actor: "alice", Limit: 2})
	if err != nil || len(page.Entries) != 2 || page.Entries[0].App != "shop" || page.Entries[1].App != "pay" || page.Next == 0 {
		t.Fatalf("List per app = %+v, %v", page, err)
	}
	r := audit.NewRefusals(db)
	r.Sample = 1
	for range 3 {
		if err := r.Record(ctx, audit.Actor{User: "anonymous"}, audit.Entry{ObjectType: "route"}); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.Purge(ctx, time.Now().UTC().Add(-audit.DefaultRetention)); err != nil || n != 1 {
		t.Fatalf("Purge = %d, %v; want 1", n, err)
	}
	all, err := s.List(ctx, audit.Filter{})
	if err != nil || len(all.Entries) != 4 {
		t.Fatalf("after purge: %d entries, %v; want 3 updates and 1 refusal", len(all.Entries), err)
	}
}
