package main

import (
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/settings"
	"github.com/sluicehq/sluice/internal/syncer"
)

// TestReadmeConfigTable keeps the README's table of sluice-sync settings
// equal to what the binary binds.
func TestReadmeConfigTable(t *testing.T) {
	cfg := config{pollInterval: syncer.DefaultPollInterval, reconcileInterval: syncer.DefaultReconcileInterval,
		batchSize: syncer.DefaultBatchSize, httpAddr: ":9090", startupTimeout: 15 * time.Second, migrate: true}
	s := bind(&cfg, func(string) string { return "" }, io.Discard)
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := settings.Table(s.Settings()); !strings.Contains(string(readme), want) {
		t.Fatalf("README.md does not hold the sluice-sync settings table; it should read:\n%s", want)
	}
}
