package rbac

import "time"

// SetHoldFor shortens how long e keeps its own uncommitted changes over
// older reloads, so that tests of a rolled-back change stay short.
func (e *Enforcer) SetHoldFor(d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.holdFor = d
}
