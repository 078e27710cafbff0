//go:build !race

package decision

const raceEnabled = false
