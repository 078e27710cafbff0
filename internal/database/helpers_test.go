package database_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/database"
)

func TestStamp(t *testing.T) {
	s := database.NewStamp("alice")
	if s.Version != 1 || s.CreatedBy != "alice" || s.UpdatedBy != "alice" || !s.CreatedAt.Equal(s.UpdatedAt) ||
		s.CreatedAt.Location() != time.UTC || s.CreatedAt.Nanosecond()%1000 != 0 {
		t.Fatalf("new stamp %+v", s)
	}
	n := s.Next("bob")
	if n.Version != 2 || n.CreatedBy != "alice" || n.UpdatedBy != "bob" || !n.CreatedAt.Equal(s.CreatedAt) ||
		n.UpdatedAt.Before(s.UpdatedAt) {
		t.Fatalf("next stamp %+v of %+v", n, s)
	}
	if s.Version != 1 || s.UpdatedBy != "alice" {
		t.Fatalf("Next changed its receiver: %+v", s)
	}
}

func TestWhereAndLike(t *testing.T) {
	if got := database.Where(nil); got != "" {
		t.Errorf("Where(nil) = %q", got)
	}
	if got := database.Where([]string{"a = ?", "b < ?"}); got != " WHERE a = ? AND b < ?" {
		t.Errorf("Where = %q", got)
	}
	if got := database.LikePrefix("a_b%c!"); got != "a!_b!%c!!%" {
		t.Errorf("LikePrefix = %q", got)
	}
	if got := database.LikeContains("x_"); got != "%x!_%" {
		t.Errorf("LikeContains = %q", got)
	}
}
