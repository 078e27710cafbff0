package usage

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/startup"
)

// rollMetrics are a Roller's Prometheus collectors. They exist even
// without a registerer, so the code never checks for nil.
type rollMetrics struct {
	rolledUpTo prometheus.Gauge
	commands   prometheus.Counter
	failures   prometheus.Counter
}

func newRollMetrics(reg prometheus.Registerer) *rollMetrics {
	m := &rollMetrics{
		rolledUpTo: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "sluice", Subsystem: "usage_rollup", Name: "rolled_up_to_timestamp_seconds",
			Help: "Unix time of the end of the last minute of usage rolled up for the console.",
		}),
		commands: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "sluice", Subsystem: "usage_rollup", Name: "redis_commands_total",
			Help: "Redis commands the usage roll-up sent: one per minute plus one per bucket active in it.",
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "sluice", Subsystem: "usage_rollup", Name: "failures_total",
			Help: "Usage roll-ups that failed (retried at the next tick).",
		}),
	}
	if reg != nil {
		m.rolledUpTo, _ = startup.Register(reg, m.rolledUpTo)
		m.commands, _ = startup.Register(reg, m.commands)
		m.failures, _ = startup.Register(reg, m.failures)
	}
	return m
}
