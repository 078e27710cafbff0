package signin_test

import (
	"testing"

	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/devdb"
	"github.com/sluicehq/sluice/internal/signin"
	"github.com/sluicehq/sluice/migrations"
)

// TestEmbeddedEngine runs the throttle on the in-process engine of -dev
// mode, through its single connection.
func TestEmbeddedEngine(t *testing.T) {
	dsn, stop, err := devdb.Start(ctx)
	must(t, err)
	t.Cleanup(stop)
	must(t, migrations.Up(dsn))
	db, err := database.Open(ctx, dsn, database.Options{MaxOpenConns: 1})
	must(t, err)
	defer db.Close()
	th := signin.New(db)
	a := signin.Attempt{User: "admin", Addr: "127.0.0.1"}
	token := signIn(t, th, a)
	if token == "" {
		t.Fatal("first sign-in refused")
	}
	for range 5 {
		begin(t, th, a)
	}
	if d := begin(t, th, a); d.Allowed {
		t.Fatal("sixth failure allowed")
	}
	a.Device = token
	if d := begin(t, th, a); !d.Allowed || !d.KnownDevice {
		t.Fatalf("known device refused: %+v", d)
	}
	must(t, th.Clear(ctx, boss, "admin"))
	if _, err := th.Purge(ctx); err != nil {
		t.Fatal(err)
	}
}
