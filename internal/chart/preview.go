package chart

import (
	"html/template"
	"time"

	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/usage"
)

// Preview draws a simulation (buckets.Simulate) of a traffic pattern
// against a bucket of rate r, like the usage charts: requests allowed
// above the zero line, denied below in DeniedColor, the sustained rate as
// a dashed line, time as seconds from the start. It draws the wide and
// the narrow drawing, like UsageResponsive.
func Preview(sim buckets.Simulation, r buckets.Rate, title string) template.HTML {
	step := sim.Step
	if step <= 0 {
		step = time.Second
	}
	n := max(len(sim.Allowed), len(sim.Denied))
	s := usage.Series{Step: step, Times: make([]time.Time, n),
		Apps: []usage.AppSeries{{App: "requests", Allowed: sim.Allowed, Denied: sim.Denied}}}
	for i := range s.Times {
		s.Times[i] = time.Unix(0, 0).UTC().Add(time.Duration(i) * step)
	}
	if title == "" {
		title = "Allowed and denied per " + human(step)
	}
	limit := Sustained(r.PerSecond(), step)
	label := "sustained: " + compact(limit) + " per " + human(step)
	if limit < 0.05 {
		// Less than a tenth per point reads as "0 per second": say the
		// rate as it was given ("1 per hour").
		label = "sustained: " + r.Human()
	}
	return UsageResponsive(s, Options{Title: title, Elapsed: true, Limit: limit, LimitLabel: label, Unit: "per " + human(step)})
}
