package migrations_test

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/migrations"
)

func TestUpDownUp(t *testing.T) {
	dsn := testenv.MySQLDSN(t) // already migrated up

	v, dirty, err := migrations.Version(dsn)
	if err != nil || dirty || v == 0 {
		t.Fatalf("Version = %d, %v, %v; want a clean non-zero version", v, dirty, err)
	}
	if err := migrations.Up(dsn); err != nil {
		t.Fatalf("second Up must be a no-op: %v", err)
	}
	if err := migrations.Down(dsn); err != nil {
		t.Fatalf("Down: %v", err)
	}
	db, err := database.Open(context.Background(), dsn, database.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var tables []string
	if err := db.Select(&tables, "SHOW TABLES"); err != nil {
		t.Fatal(err)
	}
	for _, name := range tables {
		if name != "schema_migrations" {
			t.Errorf("table %s left after Down", name)
		}
	}
	if err := migrations.Up(dsn); err != nil {
		t.Fatalf("Up after Down: %v", err)
	}
	var n int
	if err := db.Get(&n, "SELECT COUNT(*) FROM policy_revision"); err != nil || n != 1 {
		t.Fatalf("policy_revision rows = %d, %v; want 1", n, err)
	}
}

// TestAuditActorBackfill: entries written before 000002 get the user
// alone in actor_user, whatever the channel.
func TestAuditActorBackfill(t *testing.T) {
	dsn := testenv.MySQLDSN(t)
	if err := migrations.To(dsn, 1); err != nil {
		t.Fatal(err)
	}
	db, err := database.Open(context.Background(), dsn, database.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, a := range []string{"alice", "alice (api)", "bob (cli)"} {
		if _, err := db.Exec(`INSERT INTO audit_log (at, actor, action, object_type) VALUES (NOW(), ?, 'x', 'y')`, a); err != nil {
			t.Fatal(err)
		}
	}
	if err := migrations.Up(dsn); err != nil {
		t.Fatal(err)
	}
	var users []string
	if err := db.Select(&users, `SELECT actor_user FROM audit_log ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	if len(users) != 3 || users[0] != "alice" || users[1] != "alice" || users[2] != "bob" {
		t.Fatalf("actor_user after the migration = %q", users)
	}
}
