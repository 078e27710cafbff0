package chart

import (
	"fmt"
	"html/template"
	"math"
	"strings"
)

// Sparkline draws the last hour of a bucket for a row of the bucket list:
// one column per point, allowed acquires (Palette[0]) from the bottom, the
// part of them a bucket in shadow mode would have denied (would, may be
// nil) in WouldDenyColor on top of them, and denied ones (DeniedColor)
// stacked on top, scaled to the busiest point.
// It is a small SVG that fills its box's width (the stylesheet sizes
// .sparkline), with a title giving the totals and the share denied, as
// safe as Usage's output. Counts are cut or padded to the longer of
// allowed and denied; negatives count as zero.
func Sparkline(allowed, denied, would []int64) template.HTML {
	n := max(len(allowed), len(denied))
	a, d, wd := fit(allowed, n), fit(denied, n), fit(would, n)
	const w, h = 120.0, 24.0
	var totalA, totalD, totalW int64
	var peak float64
	for i := range n {
		wd[i] = min(wd[i], a[i])
		totalA, totalD, totalW = addSat(totalA, a[i]), addSat(totalD, d[i]), addSat(totalW, wd[i])
		peak = max(peak, float64(a[i])+float64(d[i]))
	}
	label := "No acquires"
	if totalA+totalD > 0 {
		label = fmt.Sprintf("%s allowed%s, %s denied (%s)", Count(totalA), wouldText(totalW), Count(totalD), Share(totalA, totalD))
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, `<svg xmlns="http://www.w3.org/2000/svg" class="sparkline" viewBox="0 0 %d %d" width="100%%" preserveAspectRatio="none" role="img" aria-label="%s"><title>%s</title>`,
		int(w), int(h), esc(label), esc(label))
	fmt.Fprintf(&sb, `<line class="sparkline-base" x1="0" x2="%d" y1="%s" y2="%s" stroke="currentColor" stroke-opacity="0.3" stroke-width="1"/>`,
		int(w), num(h-0.5), num(h-0.5))
	if peak > 0 {
		slot := w / float64(n)
		col := func(class, color string, i int, from, v float64) {
			if v <= 0 {
				return
			}
			// At least a pixel for any count, so a single denial shows.
			hh := max(v/peak*(h-1), 1)
			fmt.Fprintf(&sb, `<rect class="%s" x="%s" y="%s" width="%s" height="%s" fill="%s"/>`,
				class, num(float64(i)*slot), num(h-1-from-hh), num(max(slot-0.3, 0.5)), num(hh), color)
		}
		for i := range n {
			// Heights in pixels: allowed (its would-deny part included)
			// and what lies under each part.
			av := float64(a[i])
			col("sparkline-allowed", Palette[0], i, 0, av)
			if av > 0 {
				av = max(av/peak*(h-1), 1)
			}
			if wv := float64(wd[i]); wv > 0 {
				// The top of the allowed column, at least a pixel.
				wh := min(max(wv/peak*(h-1), 1), av)
				fmt.Fprintf(&sb, `<rect class="sparkline-would" x="%s" y="%s" width="%s" height="%s" fill="%s"/>`,
					num(float64(i)*slot), num(h-1-av), num(max(slot-0.3, 0.5)), num(wh), WouldDenyColor)
			}
			col("sparkline-denied", DeniedColor, i, av, float64(d[i]))
		}
	}
	sb.WriteString(`</svg>`)
	return template.HTML(sb.String())
}

// Share formats the share of denied acquires: "0%", "<0.1%", "4.3%", "100%".
func Share(allowed, denied int64) string {
	allowed, denied = max(allowed, 0), max(denied, 0)
	t := float64(allowed) + float64(denied)
	if t == 0 || denied == 0 {
		return "0%"
	}
	p := float64(denied) / t * 100
	switch {
	case p < 0.1:
		return "<0.1%"
	case denied == int64(t):
		return "100%"
	case p > 99.9:
		return ">99.9%"
	}
	return trim(p) + "%"
}

// Gauge draws a bucket's fill level: tokens of capacity, as a bar that
// fills its box's width (the stylesheet sizes .gauge). The bar is
// Palette[0], or DeniedColor when less than one token is left (the next
// acquire of one token would be denied). It carries role="meter" and its
// values for assistive technology, and the classes a script needs to move
// it live (web/static/app.js sets the width of .gauge-fill from
// data-capacity). Tokens are shown whole (rounded down): a fraction of a
// token cannot be taken.
func Gauge(tokens float64, capacity int64) template.HTML {
	return GaugeOf(tokens, capacity, "tokens")
}

// SlotGauge is Gauge for a concurrency limit: free slots of its limit.
func SlotGauge(free, limit int64) template.HTML {
	return GaugeOf(float64(free), limit, "slots")
}

// GaugeOf is a gauge of level of capacity, whose label counts unit
// ("tokens", "slots") available; the JS of live pages reads the unit
// from data-unit.
func GaugeOf(tokens float64, capacity int64, unit string) template.HTML {
	if math.IsNaN(tokens) || tokens < 0 {
		tokens = 0
	}
	c := float64(max(capacity, 0))
	tokens = min(tokens, c)
	whole := math.Floor(tokens)
	frac := 0.0
	if c > 0 {
		frac = tokens / c
	}
	color := Palette[0]
	if tokens < 1 {
		color = DeniedColor
	}
	label := fmt.Sprintf("%s of %s %s available", Count(int64(whole)), Count(int64(c)), unit)
	var sb strings.Builder
	fmt.Fprintf(&sb, `<svg xmlns="http://www.w3.org/2000/svg" class="gauge" viewBox="0 0 100 10" width="100%%" preserveAspectRatio="none" role="meter" aria-valuemin="0" aria-valuemax="%d" aria-valuenow="%d" aria-label="%s" data-capacity="%d" data-unit="%s"><title>%s</title>`,
		int64(c), int64(whole), esc(label), int64(c), esc(unit), esc(label))
	sb.WriteString(`<rect class="gauge-track" x="0" y="0" width="100" height="10" fill="currentColor" fill-opacity="0.15"/>`)
	fmt.Fprintf(&sb, `<rect class="gauge-fill" x="0" y="0" width="%s" height="10" fill="%s" data-low-fill="%s" data-fill="%s"/>`,
		num(frac*100), color, DeniedColor, Palette[0])
	sb.WriteString(`</svg>`)
	return template.HTML(sb.String())
}
