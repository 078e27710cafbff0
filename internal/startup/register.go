package startup

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Register adds c to reg, or returns the collector already registered
// under the same name, so that several servers or workers in one process
// (tests, -dev) share their metrics instead of failing. Any other refusal
// is returned with c.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, fmt.Errorf("register metrics: %w", err)
}
