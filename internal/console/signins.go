package console

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/startup"
)

// Sign-in results counted by sluice_console_signins_total.
const (
	signinSuccess   = "success"
	signinFailure   = "failure"
	signinThrottled = "throttled"
)

// newSignins returns the sign-in counter registered on reg, or nil
// (nothing counted) without a registerer.
func newSignins(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	if reg == nil {
		return nil, nil
	}
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "sluice", Subsystem: "console", Name: "signins_total",
		Help: "Sign-in attempts, by result (success, failure, throttled).",
	}, []string{"result"})
	// Alerts on failures and throttling should see 0, not an absent series.
	for _, r := range []string{signinSuccess, signinFailure, signinThrottled} {
		c.WithLabelValues(r)
	}
	return startup.Register(reg, c)
}

// signin counts one sign-in attempt.
func (s *server) signin(result string) {
	if s.signins != nil {
		s.signins.WithLabelValues(result).Inc()
	}
}
