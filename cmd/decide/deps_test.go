package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLinksNoMigrations: the decision service never changes the schema, so
// it must not link the migration library (it once did, through the
// start-up package's store opener).
func TestLinksNoMigrations(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on the PATH")
	}
	out, err := exec.Command(goTool, "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 {
		t.Fatalf("go list named only %d packages", len(deps))
	}
	for _, p := range deps {
		if strings.Contains(p, "golang-migrate") || strings.HasSuffix(p, "/sluice/migrations") {
			t.Errorf("sluice-decide links %s", p)
		}
	}
}
