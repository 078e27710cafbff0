package client_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/client"
)

// lockedBuffer is a log destination the Limiter's goroutines may share.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Callers choose bucket names: 300 unknown names give one line a minute,
// not 300, and a different mistake (a bucket of another app) its own.
func TestUnknownBucketNamesLoggedOnceAMinute(t *testing.T) {
	t.Parallel()
	e := sharedRedis(t)
	e.define(t, "theirs", 10, 1_000_000, 1, "billing")
	var logs lockedBuffer
	l := e.limiter(t, "svc", client.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	ctx := context.Background()
	for i := range 300 {
		if l.Allow(ctx, fmt.Sprintf("missing-%d", i)) {
			t.Fatalf("missing-%d allowed", i)
		}
	}
	if l.Allow(ctx, "theirs") {
		t.Fatal("theirs allowed")
	}
	out := logs.String()
	if n := strings.Count(out, "cannot serve this app"); n != 2 {
		t.Fatalf("%d lines for 300 unknown names and one bucket of another app, want 2:\n%s", n, out)
	}
	if !strings.Contains(out, "bucket=missing-0") || !strings.Contains(out, "bucket=theirs") {
		t.Fatalf("log lacks the first unknown name or the other app's bucket:\n%s", out)
	}
}
