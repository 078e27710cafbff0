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

// TestEmbeddedEngineObjectNames lists entries about one and several
// objects by name on the in-process engine, as the bucket history and the
// audit log's bucket filter do.
func TestEmbeddedEngineObjectNames(t *testing.T) {
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
	for _, name := range []string{"a", "b", "a", "c", "b", "a"} {
		e := audit.Entry{Action: "bucket.update", ObjectType: "bucket", ObjectName: name, App: "shop"}
		if err := audit.Write(ctx, db, audit.Actor{User: "alice", Via: "api"}, e); err != nil {
			t.Fatal(err)
		}
	}
	s := audit.NewStore(db)
	for _, tc := range []struct {
		names []string
		want  int
	}{{[]string{"a"}, 3}, {[]string{"a", "b"}, 5}, {[]string{"c", "b", "x"}, 3}} {
		page, err := s.List(ctx, audit.Filter{ObjectType: "bucket", ObjectNames: tc.names, Limit: 10})
		if err != nil || len(page.Entries) != tc.want {
			t.Fatalf("List(%v) = %d entries, %v; want %d", tc.names, len(page.Entries), err, tc.want)
		}
		for i := 1; i < len(page.Entries); i++ {
			if page.Entries[i-1].ID <= page.Entries[i].ID {
				t.Fatalf("List(%v) not newest first: %+v", tc.names, page.Entries)
			}
		}
		// The page after the first entry, both ways.
		older, err := s.List(ctx, audit.Filter{ObjectType: "bucket", ObjectNames: tc.names, Limit: 1, Before: page.Entries[0].ID})
		if err != nil || len(older.Entries) != 1 || older.Entries[0].ID != page.Entries[1].ID {
			t.Fatalf("List(%v) before %d = %+v, %v", tc.names, page.Entries[0].ID, older, err)
		}
		newer, err := s.List(ctx, audit.Filter{ObjectType: "bucket", ObjectNames: tc.names, Limit: 1, After: page.Entries[1].ID})
		if err != nil || len(newer.Entries) != 1 || newer.Entries[0].ID != page.Entries[0].ID {
			t.Fatalf("List(%v) after %d = %+v, %v", tc.names, page.Entries[1].ID, newer, err)
		}
	}
}
