package clientmetrics_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/client/clientmetrics"
)

// TestDashboard keeps docs/grafana-dashboard.json true: it is valid JSON,
// and its queries use every client metric this package registers, under
// its real name, and the sync worker's and console's metrics.
func TestDashboard(t *testing.T) {
	raw, err := os.ReadFile("../../docs/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard is not valid JSON: %v", err)
	}
	var exprs strings.Builder
	for _, p := range dash.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs.WriteString(tg.Expr + "\n")
		}
	}
	all := exprs.String()

	reg := prometheus.NewRegistry()
	m, err := clientmetrics.New(reg, "app")
	if err != nil {
		t.Fatal(err)
	}
	m.Observe(client.Decision{Bucket: "b"})
	m.Observe(client.Decision{Bucket: "b", Result: client.Result{Allowed: true, Limit: 1}}) // near the limit
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := []string{
		"sluice_sync_propagation_lag_seconds_bucket", "sluice_sync_events_applied_total",
		"sluice_sync_reconcile_repairs_total", "sluice_sync_errors_total",
		"sluice_sync_reconcile_duration_seconds_bucket", "sluice_sync_last_poll_timestamp_seconds",
		"sluice_sync_last_reconcile_timestamp_seconds",
		"sluice_console_http_requests_total", "sluice_console_http_request_duration_seconds_bucket",
		"sluice_console_signins_total",
	}
	for _, mf := range mfs {
		name := mf.GetName()
		if mf.GetType().String() == "HISTOGRAM" {
			name += "_bucket"
		}
		names = append(names, name)
	}
	for _, n := range names {
		if !strings.Contains(all, n) {
			t.Errorf("the dashboard does not query %s", n)
		}
	}
}
