package startup_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/startup"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestWaitRetriesUntilSuccess(t *testing.T) {
	calls := 0
	v, err := startup.Wait(context.Background(), 10*time.Second, quiet, "store", func(context.Context) (int, error) {
		calls++
		if calls < 3 {
			return 0, errors.New("connection refused")
		}
		return 42, nil
	})
	if err != nil || v != 42 || calls != 3 {
		t.Fatalf("Wait = %d, %v after %d calls; want 42, nil after 3", v, err, calls)
	}
}

func TestWaitGivesUpWithTheLastError(t *testing.T) {
	refused := errors.New("connection refused")
	_, err := startup.Wait(context.Background(), 300*time.Millisecond, quiet, "store", func(context.Context) (int, error) {
		return 0, refused
	})
	if !errors.Is(err, refused) {
		t.Fatalf("Wait = %v, want the last error of open", err)
	}
}
