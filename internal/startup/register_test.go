package startup_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/startup"
)

func TestRegisterSharesACollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	opts := prometheus.CounterOpts{Name: "sluice_test_total", Help: "test"}
	first, err := startup.Register(reg, prometheus.NewCounter(opts))
	if err != nil {
		t.Fatal(err)
	}
	second, err := startup.Register(reg, prometheus.NewCounter(opts))
	if err != nil || second != first {
		t.Fatalf("second Register = %v, %v; want the first collector", second, err)
	}
	// Another kind under the same name is refused.
	if _, err := startup.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_test_total", Help: "test"})); err == nil {
		t.Fatal("a gauge registered under a counter's name")
	}
}

// TestServersLinkNoClient: the servers' and workers' packages register
// their metrics here, so they do not link the client (they once imported
// the client's metrics module for Register alone).
func TestServersLinkNoClient(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on the PATH")
	}
	for _, pkg := range []string{"../router", "../syncer", "../usage", "../console"} {
		out, err := exec.Command(goTool, "list", "-deps", "-f", "{{.ImportPath}}", pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 20 {
			t.Fatalf("go list %s named only %d packages", pkg, len(deps))
		}
		for _, p := range deps {
			if strings.HasPrefix(p, "github.com/sluicehq/sluice/client") {
				t.Errorf("%s links %s", pkg, p)
			}
		}
	}
}
