//go:build race

package decision

// raceEnabled: the race detector's own memory grows with the goroutines
// and allocations a run has seen, so RSS says little about the service.
const raceEnabled = true
