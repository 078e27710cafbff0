package database_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/errs"
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
