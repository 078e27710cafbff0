package decision

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the decision service's own Prometheus metrics; the
// decisions of each bucket are counted by the client metrics of the app's
// Limiter. A nil *Metrics records nothing.
type Metrics struct {
	requests  *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	unmatch   *prometheus.CounterVec
	refreshes prometheus.Counter
	quieted   *prometheus.CounterVec
	cache     sync.Map // [2]string{transport, result} -> cached
}

// NewMetrics registers the metrics on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sluice", Subsystem: "decide", Name: "requests_total",
			Help: "Decision requests by transport (grpc, http) and result (ok, over_limit, unauthenticated, invalid, error).",
		}, []string{"transport", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "sluice", Subsystem: "decide", Name: "request_duration_seconds",
			Help:    "Time to answer a decision request, by transport.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25},
		}, []string{"transport"}),
		unmatch: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sluice", Subsystem: "decide", Name: "unmatched_total",
			Help: "Descriptors answered by the unmatched setting, by reason (unmatched, unknown_bucket, app_not_allowed, negative_hits).",
		}, []string{"reason"}),
		refreshes: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "sluice", Subsystem: "decide", Name: "config_refresh_failures_total",
			Help: "Failed reads of tokens and mappings from MySQL; the last ones loaded keep serving.",
		}),
		quieted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sluice", Subsystem: "decide", Name: "log_suppressed_total",
			Help: "Log lines left out because a line of the same kind was written in the last minute, by kind (refused_invalid, refused, mapping_unserved, internal_error).",
		}, []string{"kind"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.unmatch, m.refreshes, m.quieted} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) request(transport, result string, since time.Time) {
	if m == nil {
		return
	}
	k := [2]string{transport, result}
	c, ok := m.cache.Load(k)
	if !ok {
		c, _ = m.cache.LoadOrStore(k, cached{
			count: m.requests.WithLabelValues(transport, result), took: m.duration.WithLabelValues(transport),
		})
	}
	c.(cached).count.Inc()
	c.(cached).took.Observe(time.Since(since).Seconds())
}

// cached are the series of one transport and result, looked up once:
// label lookups hash and lock on every call.
type cached struct {
	count prometheus.Counter
	took  prometheus.Observer
}

func (m *Metrics) unmatched(reason string) {
	if m != nil {
		m.unmatch.WithLabelValues(reason).Inc()
	}
}

func (m *Metrics) refreshFailed() {
	if m != nil {
		m.refreshes.Inc()
	}
}

func (m *Metrics) logSuppressed(kind string) {
	if m != nil {
		m.quieted.WithLabelValues(kind).Inc()
	}
}
