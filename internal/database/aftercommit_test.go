package database_test

import (
	"context"
	"errors"
	"testing"

	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/testenv"
)

// TestAfterCommit: functions registered on a transaction run once its
// commit succeeded, never after a rollback; the transaction keeps the one
// time it began at.
func TestAfterCommit(t *testing.T) {
	ctx := context.Background()
	db := testenv.MySQL(t)
	ran := 0
	before := database.Now()
	if err := database.InTx(ctx, db, func(tx *database.Tx) error {
		if now := tx.Now(); now.Before(before) || now.After(database.Now()) || tx.Now() != now {
			t.Fatalf("tx.Now() = %v, want one time from the transaction's start", now)
		}
		tx.AfterCommit(func() { ran++ })
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
	err := database.InTx(ctx, db, func(tx *database.Tx) error {
		tx.AfterCommit(func() { ran++ })
		return boom
	})
	if !errors.Is(err, boom) || ran != 1 {
		t.Fatalf("after a rollback: err %v, ran %d", err, ran)
	}
}
