//go:build dev

package database_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/devdb"
)

// The embedded engine of -dev mode knows neither statement time limit
// variable: a pool asking for one still works.
func TestStatementTimeoutOnTheEmbeddedEngine(t *testing.T) {
	ctx := context.Background()
	dsn, stop, err := devdb.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	db, err := database.Open(ctx, dsn, database.Options{MaxOpenConns: 1, StatementTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var one int
	if err := db.GetContext(ctx, &one, `SELECT 1`); err != nil || one != 1 {
		t.Fatalf("SELECT 1 = %d, %v", one, err)
	}
}
