package redisscript

import (
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/redisscript/limits"
)

// TestScriptLimitsMatchGo: the acquire script repeats the largest n, which
// Lua cannot import; it must be the Go limit.
func TestScriptLimitsMatchGo(t *testing.T) {
	if want := "local MAX_N = " + strconv.Itoa(limits.MaxCapacity) + "\n"; !strings.Contains(AcquireScript.Source(), want) {
		t.Fatalf("acquire.lua does not define %q", strings.TrimSpace(want))
	}
}

func TestSyncMarkerIsNotABucket(t *testing.T) {
	for _, ks := range []Keyspace{{}, {Prefix: "x:"}} {
		m := ks.SyncMarker()
		if !strings.HasPrefix(m, ks.prefix()) {
			t.Errorf("marker %q is outside the prefix %q", m, ks.prefix())
		}
		if name, ok := ks.NameOf(m); ok {
			t.Errorf("marker %q reads as bucket %q", m, name)
		}
	}
}
