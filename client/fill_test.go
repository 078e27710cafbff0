package client

import "testing"

func TestResultUsed(t *testing.T) {
	for _, tt := range []struct {
		r    Result
		want float64
	}{
		{Result{Limit: 10, Remaining: 10}, 0},
		{Result{Limit: 10, Remaining: 7}, 0.3},
		{Result{Limit: 10, Remaining: 0}, 1},
		{Result{Limit: 10, Remaining: -4}, 1}, // in debt
		{Result{Limit: 10, Remaining: 12}, 0}, // more than the capacity: full
		{Result{Limit: 0, Remaining: 5}, 0},   // capacity unknown (fail open)
	} {
		if got := tt.r.Used(); got < tt.want-1e-9 || got > tt.want+1e-9 {
			t.Errorf("%+v.Used() = %v; want %v", tt.r, got, tt.want)
		}
	}
}
