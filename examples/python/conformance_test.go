// Package python holds the Python reference client of the Sluice protocol;
// its Go test runs the client's conformance run as part of `make test`.
package python

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

// pythonWithRedis finds a Python 3 that can import redis-py: the one named
// by SLUICE_TEST_PYTHON, else python3 on the PATH, else the system one
// (where Debian's python3-redis installs, when the PATH leads to another).
func pythonWithRedis(t *testing.T) string {
	t.Helper()
	candidates := []string{"python3", "/usr/bin/python3"}
	if p := os.Getenv("SLUICE_TEST_PYTHON"); p != "" {
		candidates = []string{p}
	}
	for _, c := range candidates {
		p, err := exec.LookPath(c)
		if err != nil {
			continue
		}
		if exec.Command(p, "-c", "import redis").Run() == nil {
			return p
		}
	}
	testenv.Unavailable(t, "python3 with redis-py (Debian package python3-redis; or set SLUICE_TEST_PYTHON)")
	return ""
}

// TestPythonConformance runs docs/conformance.json through the Python
// reference client against the test Redis.
func TestPythonConformance(t *testing.T) {
	t.Parallel()
	py := pythonWithRedis(t)
	_, prefix := testenv.Redis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-B", "conformance.py", "--addr", testenv.RedisAddr(t), "--prefix", prefix)
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("python conformance run: %v", err)
	}
	if !strings.Contains(string(out), ": ok\n") {
		t.Fatal("python conformance run did not report ok")
	}
}
