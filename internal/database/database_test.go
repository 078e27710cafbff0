package database_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/testenv"
)

func TestTranslate(t *testing.T) {
	tests := []struct {
		name        string
		err         error
		unavailable bool
	}{
		{"nil", nil, false},
		{"duplicate key", &mysql.MySQLError{Number: 1062, Message: "Duplicate entry"}, false},
		{"syntax", &mysql.MySQLError{Number: 1064}, false},
		{"deadlock", &mysql.MySQLError{Number: 1213}, true},
		{"server shutting down", &mysql.MySQLError{Number: 1053}, true},
		{"too many connections", &mysql.MySQLError{Number: 1040}, true},
		{"dial refused", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, true},
		{"invalid connection", fmt.Errorf("query: %w", mysql.ErrInvalidConn), true},
		{"deadline", context.DeadlineExceeded, true},
		{"other", errors.New("boom"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := database.Translate(tt.err)
			if errors.Is(got, errs.ErrUnavailable) != tt.unavailable {
				t.Fatalf("Translate(%v) = %v; unavailable = %v, want %v", tt.err, got, !tt.unavailable, tt.unavailable)
			}
			if tt.err != nil && !errors.Is(got, tt.err) {
				t.Fatalf("Translate(%v) lost the original error", tt.err)
			}
		})
	}
	if database.IsDuplicate(&mysql.MySQLError{Number: 1062}) != true || database.IsDuplicate(errors.New("x")) {
		t.Fatal("IsDuplicate misjudges")
	}
}

func TestOpenRejectsBadDSN(t *testing.T) {
	if _, err := database.Open(context.Background(), "not a dsn", database.Options{}); err == nil {
		t.Fatal("Open accepted a malformed DSN")
	}
}

// A pool with a statement time limit sets it on every connection, and the
// server stops a statement that runs longer.
func TestStatementTimeout(t *testing.T) {
	dsn := testenv.MySQLDSN(t)
	ctx := context.Background()
	db, err := database.Open(ctx, dsn, database.Options{MaxOpenConns: 2, StatementTimeout: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var limit float64
	if err := db.GetContext(ctx, &limit, `SELECT @@SESSION.max_statement_time`); err != nil {
		t.Fatal(err)
	}
	if limit != 1.5 {
		t.Fatalf("max_statement_time = %v, want 1.5", limit)
	}
	// SLEEP stopped by the limit answers 1 (interrupted) or an error;
	// a SLEEP that ran to its end answers 0.
	var slept int
	err = db.GetContext(ctx, &slept, `SELECT SLEEP(30)`)
	if err == nil && slept == 0 {
		t.Fatal("a 30 s statement ran to its end under a 1.5 s limit")
	}
}
