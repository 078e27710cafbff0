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
