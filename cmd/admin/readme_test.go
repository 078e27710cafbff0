package main

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeRunsDev keeps the README's one-command run true: it is the
// command this package says runs -dev.
func TestReadmeRunsDev(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "\n"+devCommand+"\n") {
		t.Fatalf("README.md does not show %q on a line of its own", devCommand)
	}
}

// TestReadmeDeploysWithoutDocker keeps the README's path without Docker
// whole: it builds the binaries under the names -h uses and creates the
// first admin, without whom nobody can sign in.
func TestReadmeDeploysWithoutDocker(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	_, path, ok := strings.Cut(text, "Without Docker")
	if !ok {
		t.Fatal("README.md has no path without Docker")
	}
	path, _, _ = strings.Cut(path, "\n## ")
	for _, want := range []string{"\nmake build\n", "\nbin/sluice-admin create-user -username admin -admin -password-stdin", "\nbin/sluice-admin serve", "bin/sluice-sync", "bin/sluice-decide"} {
		if !strings.Contains(path, want) {
			t.Errorf("README.md's path without Docker does not show %q", strings.TrimSpace(want))
		}
	}
	for _, stale := range []string{"bin/admin", "bin/sync", "bin/decide"} {
		if strings.Contains(text, stale) {
			t.Errorf("README.md names %s; the binaries are bin/sluice-*", stale)
		}
	}
	makefile, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(makefile), `-o "$(BINDIR)/sluice-$$cmd"`) {
		t.Error("make build does not write bin/sluice-admin, bin/sluice-sync and bin/sluice-decide")
	}
}
