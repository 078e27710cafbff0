package main

import (
	"io"
	"os"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/settings"
)

// TestReadmeConfigTable keeps the README's table of sluice-admin settings
// equal to what the binary binds.
func TestReadmeConfigTable(t *testing.T) {
	cfg := defaultServe()
	s := bindServe(&cfg, env{getenv: noEnv, stderr: io.Discard})
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := settings.Table(s.Settings()); !strings.Contains(string(readme), want) {
		t.Fatalf("README.md does not hold the sluice-admin settings table; it should read:\n%s", want)
	}
}
