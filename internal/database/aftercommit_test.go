package database_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/testenv"
)

// TestAfterCommit: registered functions run once the commit succeeded,
// never after a rollback, and cannot be registered on a transaction InTx
// did not begin.
func TestAfterCommit(t *testing.T) {
	ctx := context.Background()
	db := testenv.MySQL(t)
	ran := 0
	if err := database.InTx(ctx, db, func(tx *sqlx.Tx) error {
		if !database.AfterCommit(tx, func() { ran++ }) {
			t.Fatal("AfterCommit refused a transaction of InTx")
		}
		if ran != 0 {
			t.Fatal("ran before the commit")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if ran != 1 {
		t.Fatalf("ran %d times after a commit, want 1", ran)
	}
	boom := errors.New("boom")
	err := database.InTx(ctx, db, func(tx *sqlx.Tx) error {
		database.AfterCommit(tx, func() { ran++ })
		return boom
	})
	if !errors.Is(err, boom) || ran != 1 {
		t.Fatalf("after a rollback: err %v, ran %d", err, ran)
	}
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if database.AfterCommit(tx, func() { ran++ }) {
		t.Fatal("AfterCommit accepted a transaction InTx did not begin")
	}
}
