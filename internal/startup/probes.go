package startup

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// NewRegistry returns a metrics registry holding the Go runtime and
// process metrics that every binary exposes beside its own.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// MetricsHandler serves reg's metrics to Prometheus.
func MetricsHandler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
}

// readyTimeout bounds a readiness check: a store that hangs must make the
// probe fail, not hang it.
const readyTimeout = 2 * time.Second

// Probes adds to mux what orchestrators and Prometheus poll: GET /healthz
// (the process answers), GET /readyz (the report of ready as JSON, with
// 503 unless ready says the binary is ready) and, unless reg is nil, GET
// /metrics (reg). The report must hold no error text: the probes answer
// anyone who reaches the port, so the details go to the log.
func Probes(mux *http.ServeMux, reg *prometheus.Registry, ready func(context.Context) (report any, ok bool)) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		defer cancel()
		report, ok := ready(ctx)
		w.Header().Set("Content-Type", "application/json")
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(report)
	})
	if reg != nil {
		mux.Handle("GET /metrics", MetricsHandler(reg))
	}
}

// MetricsServer is a server of reg at /metrics and nothing else, for a
// listener of its own (ProbeLimits).
func MetricsServer(reg *prometheus.Registry, log *slog.Logger) *http.Server {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", MetricsHandler(reg))
	return ProbeLimits().HTTPServer(mux, log)
}
