package syncer

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/startup"
)

// metrics are the worker's Prometheus collectors. They exist even when no
// registerer is configured, so the code never checks for nil.
type metrics struct {
	lag               prometheus.Histogram
	applied           *prometheus.CounterVec
	repairs           *prometheus.CounterVec
	errors            *prometheus.CounterVec
	reconcileDuration prometheus.Histogram
	lastSync          prometheus.Gauge
	lastReconcile     prometheus.Gauge
}

// Repair kinds counted by sluice_sync_reconcile_repairs_total.
const (
	repairMissing   = "missing"
	repairDiffering = "differing"
	repairExtra     = "extra"
	repairForced    = "forced"
	// Overrides of keyed buckets.
	repairOverrideMissing   = "override_missing"
	repairOverrideDiffering = "override_differing"
	repairOverrideExtra     = "override_extra"
	// A quota's table of periods renewed (routine, once per period).
	renewTable = "quota_table"
)

// Error stages counted by sluice_sync_errors_total.
const (
	stagePoll      = "poll"
	stageApply     = "apply"
	stageAck       = "ack"
	stageReconcile = "reconcile"
	stageMarker    = "marker"
)

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "sluice", Subsystem: "sync", Name: "propagation_lag_seconds",
			Help:    "Time from a bucket change being committed to its event being applied to Redis.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}),
		applied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sluice", Subsystem: "sync", Name: "events_applied_total",
			Help: "Change events applied to Redis, by operation and outcome.",
		}, []string{"op", "outcome"}),
		repairs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sluice", Subsystem: "sync", Name: "reconcile_repairs_total",
			Help: "Bucket hashes the full reconcile repaired, by kind (missing, differing, extra, forced, quota_table: a quota's table of periods renewed).",
		}, []string{"kind"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sluice", Subsystem: "sync", Name: "errors_total",
			Help: "Failed attempts, by stage (poll, apply, ack, reconcile, marker).",
		}, []string{"stage"}),
		reconcileDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "sluice", Subsystem: "sync", Name: "reconcile_duration_seconds",
			Help:    "Duration of successful full reconciles.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
		}),
		lastSync: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "sluice", Subsystem: "sync", Name: "last_poll_timestamp_seconds",
			Help: "Unix time of the last successful poll of the change events.",
		}),
		lastReconcile: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "sluice", Subsystem: "sync", Name: "last_reconcile_timestamp_seconds",
			Help: "Unix time of the last successful full reconcile.",
		}),
	}
	// Pre-create the label sets people alert on, so they read 0 rather than absent.
	for _, k := range []string{repairMissing, repairDiffering, repairExtra, repairForced} {
		m.repairs.WithLabelValues(k)
	}
	for _, s := range []string{stagePoll, stageApply, stageAck, stageReconcile, stageMarker} {
		m.errors.WithLabelValues(s)
	}
	if reg != nil {
		m.lag, _ = startup.Register(reg, m.lag)
		m.applied, _ = startup.Register(reg, m.applied)
		m.repairs, _ = startup.Register(reg, m.repairs)
		m.errors, _ = startup.Register(reg, m.errors)
		m.reconcileDuration, _ = startup.Register(reg, m.reconcileDuration)
		m.lastSync, _ = startup.Register(reg, m.lastSync)
		m.lastReconcile, _ = startup.Register(reg, m.lastReconcile)
	}
	return m
}
