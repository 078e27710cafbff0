package router

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/startup"
)

// UnmatchedRoute labels requests that matched no route: unknown paths,
// wrong methods, and requests refused before routing (cross-origin). The
// raw URL is never a label, so a scan of random paths adds no series.
const UnmatchedRoute = "unmatched"

// metrics are the request collectors. A nil *metrics (no registerer
// configured) records nothing. Their names keep the "console" subsystem
// the console and the API have always been measured under.
type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sluice", Subsystem: "console", Name: "http_requests_total",
			Help: "Console and API requests answered, by route template, method and status code.",
		}, []string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "sluice", Subsystem: "console", Name: "http_request_duration_seconds",
			Help:    "Time to answer console and API requests, by route template and method.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route", "method"}),
	}
	var err error
	if m.requests, err = startup.Register(reg, m.requests); err != nil {
		return nil, err
	}
	if m.duration, err = startup.Register(reg, m.duration); err != nil {
		return nil, err
	}
	return m, nil
}

// routeSlot carries the matched route template from the router back out to
// instrument, which runs around it.
type routeSlot struct{ route string }

type routeSlotKey struct{}

// instrument counts and times every request next answers. The route label
// is the router's template ("/buckets/:bucket"), filled in by markRoute,
// or the one a Label handler gives ("/api/v1/buckets/{bucket}").
func (m *metrics) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		slot := &routeSlot{}
		r = r.WithContext(context.WithValue(r.Context(), routeSlotKey{}, slot))
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)

		route := slot.route
		if route == "" {
			route = UnmatchedRoute
		}
		method := methodLabel(r.Method)
		code := sw.status
		if code == 0 {
			code = http.StatusOK
		}
		m.requests.WithLabelValues(route, method, strconv.Itoa(code)).Inc()
		m.duration.WithLabelValues(route, method).Observe(time.Since(start).Seconds())
	})
}

// markRoute records the matched route for instrument. It is the router's
// first middleware; gin leaves FullPath empty for unmatched requests.
func markRoute(c *gin.Context) {
	if slot, ok := c.Request.Context().Value(routeSlotKey{}).(*routeSlot); ok {
		slot.route = c.FullPath()
	}
	c.Next()
}

// methodLabel keeps the method label to the standard methods: anything
// else a client sends is "other".
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "other"
}

// statusWriter remembers the status code written through it.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush passes a flush on when the connection supports it (gin's writer
// assumes it does).
func (w *statusWriter) Flush() {
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
