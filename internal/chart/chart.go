// Package chart draws usage charts as SVG on the server, so that the
// console needs no script and no external library to show them.
//
// The chart puts time left to right and, for every point, stacks each
// app's allowed acquires above a zero line, in the app's colour, and the
// denied acquires below it in one colour that means "denied" everywhere in
// the console (vermillion, the red of the Okabe-Ito palette, which stays
// distinct from every allowed colour for colour-blind readers). Allowed
// acquires that a bucket in shadow mode would have denied stay above the
// line (they were allowed) but are drawn apart, on top of each point's
// stack, in WouldDenyColor (Okabe-Ito orange), with a legend entry. Calls
// a client's failure policy answered while Redis did not (no bucket
// decided them) are drawn as their own series, pale: those it granted on
// top of the allowed stack in the text's colour, those it refused below
// the denied ones in pale vermillion with a vermillion edge. The limit
// (capacity plus rate over one point) can be drawn as a dashed line. Every
// point has a tooltip (an SVG title) with its exact counts per app. An
// empty chart is a short box that says so, not a full-height empty grid.
//
// Usage draws one SVG that scales to its container (viewBox, width 100%).
// Text in an SVG scales with it, so one drawing cannot be readable both at
// 1280 and at 400 px wide: UsageResponsive draws a wide and a narrow one
// and the stylesheet shows the one that fits.
//
// The output is plain SVG markup to embed in a page: no script, no style
// element or attribute (colours and fonts are presentation attributes,
// which a Content-Security-Policy without 'unsafe-inline' allows), no ids
// (several charts fit on one page), text in currentColor (so it follows
// the page's light or dark scheme), and classes on every part for the
// page's stylesheet to adjust. Every text that comes from the input is
// escaped.
package chart

import (
	"fmt"
	"html"
	"html/template"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sluicehq/sluice/internal/usage"
)

// Options adjust a chart. The zero value is usable.
type Options struct {
	// Title is drawn above the chart and names it for screen readers.
	// Empty means "Usage of <bucket>, last <window>".
	Title string
	// Width is the width of the drawing in SVG units (default 720). The SVG
	// scales to its container's width; the height follows.
	Width int
	// MaxApps is how many apps get a colour of their own (default 8); the
	// quieter ones are summed as "other apps".
	MaxApps int
	// Location is the time zone of the time labels (default UTC).
	Location *time.Location
	// Limit is the bucket's sustained limit over one point (step) of the
	// chart, drawn as a dashed line when > 0: see Sustained. Bars above it
	// are bursts paid from the bucket's capacity. LimitLabel names it
	// ("limit: 300 per minute").
	// A limit more than limitFit times the highest bar is not drawn (the
	// scale follows the data, so traffic never shrinks to a sliver under
	// a far-away line): the legend says it is above the scale.
	Limit      float64
	LimitLabel string
	// Unit names what one point counts, for the axis names ("per minute":
	// "allowed per minute"). Empty: no unit.
	Unit string
	// Shadow says the bucket is in shadow mode: the legend names the
	// would-deny colour even while there are none to draw.
	Shadow bool
	// Elapsed labels time as the offset from the first point ("+30 s",
	// "+2 min") rather than the time of day: for a simulation.
	Elapsed bool
	// Calls names what is counted, in the plural: "slot takes" for a
	// concurrency limit. Empty means "acquires".
	Calls string
}

// limitFit is how far above the highest bar a limit line may be drawn:
// the data keep at least a quarter of the chart's height.
const limitFit = 4

// Sustained is the limit line of a bucket refilling perSecond tokens a
// second, for points of step: what it allows per step once its capacity
// is spent, in one-token acquires. Invalid input gives 0 (no line).
func Sustained(perSecond float64, step time.Duration) float64 {
	if perSecond <= 0 || math.IsNaN(perSecond) || math.IsInf(perSecond, 0) || step <= 0 {
		return 0
	}
	return perSecond * step.Seconds()
}

// Palette holds the colours of the apps' allowed acquires, in order of
// traffic: the Okabe-Ito colours that no colour-vision deficiency confuses
// with DeniedColor (no vermillion), nor with WouldDenyColor (no orange).
var Palette = []string{"#0072B2", "#56B4E9", "#009E73", "#CC79A7", "#F0E442"}

// DeniedColor is the colour of denied acquires, in charts, sparklines and
// the stylesheet alike: Okabe-Ito vermillion.
const DeniedColor = "#D55E00"

// WouldDenyColor is the colour of the acquires a bucket in shadow mode
// allowed but would have denied: Okabe-Ito orange, a warning beside the
// vermillion of denials and distinct from it and from every Palette
// colour for colour-blind readers.
const WouldDenyColor = "#E69F00"

// otherColor is the colour of the apps past MaxApps.
const otherColor = "#8c8c8c"

// Layout in SVG units.
const (
	plotHeight   = 200
	marginLeft   = 58
	marginRight  = 16
	titleHeight  = 34
	axisHeight   = 26
	legendRow    = 20
	charWidth    = 7 // average width of a character at font-size 12
	swatchWidth  = 12
	legendGap    = 20
	defaultWidth = 720
	minWidth     = 240
	maxWidth     = 4000
)

// bar is one app's counts, or the sum of the other apps, ready to draw.
type bar struct {
	name            string
	color           string
	allowed, denied []int64
	// would is the part of allowed a shadow-mode bucket would have denied.
	would []int64
	// fbA and fbR are the calls the failure policy granted and refused.
	fbA, fbR                                 []int64
	totalA, totalD, totalW, totalFA, totalFR int64
}

// fallbackOpacity is the fill opacity of the failure policy's answers.
const fallbackOpacity = "0.35"

// Usage returns series s drawn as an SVG element. The result is safe to
// put in an html/template unescaped (it is a template.HTML): every text
// from s and o is escaped here. It never fails: counts that do not match
// s.Times in length are cut or padded with zeros, negative counts count
// as zero, and a series without counts draws a short box that says so.
func Usage(s usage.Series, o Options) template.HTML {
	if o.Width <= 0 {
		o.Width = defaultWidth
	}
	o.Width = min(max(o.Width, minWidth), maxWidth)
	if o.MaxApps <= 0 {
		o.MaxApps = len(Palette)
	}
	if o.Location == nil {
		o.Location = time.UTC
	}
	if math.IsNaN(o.Limit) || math.IsInf(o.Limit, 0) || o.Limit < 0 {
		o.Limit = 0
	}
	if o.Calls == "" {
		o.Calls = "acquires"
	}
	title := o.Title
	if title == "" {
		title = "Usage of " + s.Bucket + ", last " + s.Window.String()
	}
	n := len(s.Times)
	bars := makeBars(s, n, o.MaxApps)
	var totalA, totalD, totalW, totalFA, totalFR int64
	for _, b := range bars {
		totalA = addSat(totalA, b.totalA)
		totalD = addSat(totalD, b.totalD)
		totalW = addSat(totalW, b.totalW)
		totalFA = addSat(totalFA, b.totalFA)
		totalFR = addSat(totalFR, b.totalFR)
	}
	plotW := o.Width - marginLeft - marginRight

	var sb strings.Builder
	if totalA == 0 && totalD == 0 && totalFA == 0 && totalFR == 0 {
		// Nothing to draw: a short box, not a full-height empty grid.
		h := titleHeight + 34
		fmt.Fprintf(&sb, `<svg xmlns="http://www.w3.org/2000/svg" class="chart usage-chart chart-is-empty" viewBox="0 0 %d %d" width="100%%" role="img" aria-label="%s" font-family="system-ui, -apple-system, 'Segoe UI', sans-serif" font-size="12">`,
			o.Width, h, esc(title+": no "+o.Calls+" counted in this window"))
		fmt.Fprintf(&sb, `<title>%s</title>`, esc(title))
		fmt.Fprintf(&sb, `<text class="chart-title" x="%d" y="20" font-size="14" font-weight="600" fill="currentColor">%s</text>`,
			marginLeft, esc(title))
		fmt.Fprintf(&sb, `<text class="chart-empty" x="%d" y="%d" fill="currentColor" fill-opacity="0.75">No %s counted in this window</text>`,
			marginLeft, titleHeight+14, esc(o.Calls))
		sb.WriteString(`</svg>`)
		return template.HTML(sb.String())
	}

	// Legend rows, laid out left to right: one swatch per app's allowed
	// acquires, one for the denied ones of every app.
	type item struct {
		x, row int
		color  string // "" for the limit's dashed line
		label  string
		pale   bool // a failure policy's series
	}
	var items []item
	x, row := 0, 0
	addItem := func(color, label string, pale bool) {
		w := swatchWidth + 6 + utf8.RuneCountInString(label)*charWidth
		if x > 0 && x+w > plotW {
			x, row = 0, row+1
		}
		items = append(items, item{x: x, row: row, color: color, label: label, pale: pale})
		x += w + legendGap
	}
	add := func(color, label string) { addItem(color, label, false) }
	for i := range bars {
		b := &bars[i]
		add(b.color, fmt.Sprintf("%s: %s allowed, %s denied", b.name, Count(b.totalA), Count(b.totalD)))
	}
	add(DeniedColor, "denied: "+Count(totalD))
	if totalW > 0 || o.Shadow {
		add(WouldDenyColor, "would deny (shadow mode): "+Count(totalW))
	}
	if totalFA > 0 || totalFR > 0 {
		// currentColor: the legend's text colour, as the bars are drawn.
		addItem("currentColor", "granted by the failure policy: "+Count(totalFA), true)
		addItem(DeniedColor, "refused by the failure policy: "+Count(totalFR), true)
	}
	// Vertical scale: allowed above zero, denied below, one unit; the
	// limit inside the top when it fits. In float64: sums of huge counts
	// must not overflow.
	var maxA, maxD float64
	for i := range n {
		var a, d float64
		for _, b := range bars {
			a += float64(b.allowed[i]) + float64(b.fbA[i])
			d += float64(b.denied[i]) + float64(b.fbR[i])
		}
		maxA, maxD = max(maxA, a), max(maxD, d)
	}
	if o.Limit > 0 {
		// In the legend, not on the line, where it would cover bars.
		if o.LimitLabel == "" {
			o.LimitLabel = "limit: " + compact(o.Limit)
		}
		if o.Limit > limitFit*max(maxA, maxD) {
			add("", o.LimitLabel+" (above the scale)")
			o.Limit = 0
		} else {
			add("", o.LimitLabel)
		}
	}
	rows := row + 1
	height := titleHeight + plotHeight + axisHeight + rows*legendRow + 6

	maxA = max(maxA, o.Limit)
	step := niceStep((maxA + maxD) / 5)
	topV := math.Max(step, math.Ceil(maxA/step)*step)
	botV := math.Ceil(maxD/step) * step
	// The grid lines, top to bottom; counted, not stepped, so that rounding
	// can never make the loop long.
	var grid []float64
	for k := 0.0; k <= math.Round((topV+botV)/step) && k <= 20; k++ {
		grid = append(grid, topV-k*step)
	}
	y := func(v float64) float64 {
		return titleHeight + (topV-v)/(topV+botV)*plotHeight
	}
	slot := float64(plotW) / float64(max(n, 1))
	barW := slot
	if slot > 3 {
		barW = slot - 1 // a hairline between bars when there is room
	}
	xAt := func(i int) float64 { return marginLeft + float64(i)*slot }

	sb.Grow(4096 + n*len(bars)*120)
	fmt.Fprintf(&sb, `<svg xmlns="http://www.w3.org/2000/svg" class="chart usage-chart" viewBox="0 0 %d %d" width="100%%" role="img" aria-label="%s" font-family="system-ui, -apple-system, 'Segoe UI', sans-serif" font-size="12">`,
		o.Width, height, esc(fmt.Sprintf("%s: %s allowed, %s denied%s", title, Count(totalA), Count(totalD), fallbackText(totalFA, totalFR))))
	fmt.Fprintf(&sb, `<title>%s</title>`, esc(title))
	fmt.Fprintf(&sb, `<desc>%s</desc>`, esc(describe(s, bars, o)))
	fmt.Fprintf(&sb, `<text class="chart-title" x="%d" y="20" font-size="14" font-weight="600" fill="currentColor">%s</text>`,
		marginLeft, esc(title))

	// Grid and y labels.
	sb.WriteString(`<g class="chart-grid" stroke="currentColor" stroke-opacity="0.15" stroke-width="1">`)
	for _, v := range grid {
		fmt.Fprintf(&sb, `<line x1="%d" x2="%d" y1="%s" y2="%s"/>`, marginLeft, o.Width-marginRight, num(y(v)), num(y(v)))
	}
	sb.WriteString(`</g><g class="chart-axis-labels" fill="currentColor" fill-opacity="0.75" text-anchor="end">`)
	for _, v := range grid {
		fmt.Fprintf(&sb, `<text x="%d" y="%s">%s</text>`, marginLeft-6, num(y(v)+4), compact(math.Abs(v)))
	}
	sb.WriteString(`</g>`)
	unit := ""
	if o.Unit != "" {
		unit = " " + o.Unit
	}
	fmt.Fprintf(&sb, `<g class="chart-axis-names" fill="currentColor" fill-opacity="0.75" font-size="11"><text x="%d" y="%s">allowed%s ↑</text>`,
		marginLeft+4, num(float64(titleHeight)+12), esc(unit))
	if botV > 0 {
		fmt.Fprintf(&sb, `<text x="%d" y="%s">denied%s ↓</text>`, marginLeft+4, num(float64(titleHeight+plotHeight)-4), esc(unit))
	}
	sb.WriteString(`</g>`)

	// Bars: per point, each app's allowed stacked up from zero in its
	// colour, denied down in DeniedColor; the would-deny part of the
	// allowed ones on top of the stack in WouldDenyColor.
	sb.WriteString(`<g class="chart-bars">`)
	for bi, b := range bars {
		fmt.Fprintf(&sb, `<g class="chart-app" fill="%s">`, b.color)
		for i := range n {
			if b.allowed[i] == 0 && b.denied[i] == 0 {
				continue
			}
			var below, belowD float64
			for _, o := range bars[:bi] {
				below += float64(o.allowed[i] - o.would[i])
				belowD += float64(o.denied[i])
			}
			if a := float64(b.allowed[i] - b.would[i]); a > 0 {
				y0, y1 := y(below+a), y(below)
				fmt.Fprintf(&sb, `<rect class="chart-allowed" x="%s" y="%s" width="%s" height="%s"/>`,
					num(xAt(i)), num(y0), num(barW), num(y1-y0))
			}
			if d := float64(b.denied[i]); d > 0 {
				y0, y1 := y(-belowD), y(-(belowD + d))
				fmt.Fprintf(&sb, `<rect class="chart-denied" x="%s" y="%s" width="%s" height="%s" fill="%s"/>`,
					num(xAt(i)), num(y0), num(barW), num(y1-y0), DeniedColor)
			}
		}
		sb.WriteString(`</g>`)
	}
	if totalW > 0 {
		fmt.Fprintf(&sb, `<g class="chart-would-deny" fill="%s">`, WouldDenyColor)
		for i := range n {
			var a, w float64
			for _, b := range bars {
				a += float64(b.allowed[i] - b.would[i])
				w += float64(b.would[i])
			}
			if w > 0 {
				y0, y1 := y(a+w), y(a)
				fmt.Fprintf(&sb, `<rect class="chart-would" x="%s" y="%s" width="%s" height="%s"/>`,
					num(xAt(i)), num(y0), num(barW), num(y1-y0))
			}
		}
		sb.WriteString(`</g>`)
	}
	if totalFA > 0 || totalFR > 0 {
		// The failure policy's answers: granted on top of everything
		// allowed, refused under everything denied.
		sb.WriteString(`<g class="chart-fallback">`)
		for i := range n {
			var a, d, fa, fr float64
			for _, b := range bars {
				a += float64(b.allowed[i])
				d += float64(b.denied[i])
				fa += float64(b.fbA[i])
				fr += float64(b.fbR[i])
			}
			if fa > 0 {
				y0, y1 := y(a+fa), y(a)
				fmt.Fprintf(&sb, `<rect class="chart-fallback-granted" x="%s" y="%s" width="%s" height="%s" fill="currentColor" fill-opacity="%s"/>`,
					num(xAt(i)), num(y0), num(barW), num(y1-y0), fallbackOpacity)
			}
			if fr > 0 {
				y0, y1 := y(-d), y(-(d + fr))
				fmt.Fprintf(&sb, `<rect class="chart-fallback-refused" x="%s" y="%s" width="%s" height="%s" fill="%s" fill-opacity="%s" stroke="%s" stroke-width="1"/>`,
					num(xAt(i)), num(y0), num(barW), num(y1-y0), DeniedColor, fallbackOpacity, DeniedColor)
			}
		}
		sb.WriteString(`</g>`)
	}
	sb.WriteString(`</g>`)
	fmt.Fprintf(&sb, `<line class="chart-zero" x1="%d" x2="%d" y1="%s" y2="%s" stroke="currentColor" stroke-opacity="0.6"/>`,
		marginLeft, o.Width-marginRight, num(y(0)), num(y(0)))
	if o.Limit > 0 {
		ly := y(o.Limit)
		fmt.Fprintf(&sb, `<g class="chart-limit"><line x1="%d" x2="%d" y1="%s" y2="%s" stroke="currentColor" stroke-width="1.5" stroke-dasharray="6 4"><title>%s</title></line></g>`,
			marginLeft, o.Width-marginRight, num(ly), num(ly), esc(o.LimitLabel))
	}

	// Time labels: at most one per 60 units of width, 7 in all.
	every := labelEvery(s.Step, n, min(7, max(2, plotW/60)))
	sb.WriteString(`<g class="chart-time-labels" fill="currentColor" fill-opacity="0.75" text-anchor="middle">`)
	base := float64(titleHeight + plotHeight)
	for i, t := range s.Times {
		lt := t.In(o.Location)
		if !aligned(lt, every) {
			continue
		}
		text := lt.Format("15:04")
		switch {
		case o.Elapsed:
			text = elapsed(t.Sub(s.Times[0]))
		case every >= 24*time.Hour:
			text = lt.Format("Mon 2")
		}
		if o.Elapsed {
			fmt.Fprintf(&sb, `<text x="%s" y="%s">%s</text>`, num(xAt(i)), num(base+18), esc(text))
			continue
		}
		// data-t lets the page's script write the time in the viewer's
		// zone (web/static/app.js), keeping this UTC text on hover.
		f := "time"
		if every >= 24*time.Hour {
			f = "day"
		}
		fmt.Fprintf(&sb, `<text x="%s" y="%s" data-t="%s" data-f="%s">%s<title>%s</title></text>`, num(xAt(i)), num(base+18),
			t.UTC().Format(time.RFC3339), f, esc(text), esc(t.UTC().Format("2006-01-02 15:04")+" UTC"))
	}
	sb.WriteString(`</g>`)

	// Legend.
	sb.WriteString(`<g class="chart-legend" fill="currentColor">`)
	for _, it := range items {
		lx := marginLeft + it.x
		ly := titleHeight + plotHeight + axisHeight + it.row*legendRow
		switch {
		case it.color == "":
			fmt.Fprintf(&sb, `<line class="chart-limit-key" x1="%d" x2="%d" y1="%d" y2="%d" stroke="currentColor" stroke-width="1.5" stroke-dasharray="4 3"/>`,
				lx, lx+swatchWidth, ly+8, ly+8)
		case it.pale:
			fmt.Fprintf(&sb, `<rect x="%d" y="%d" width="%d" height="%d" fill="%s" fill-opacity="%s" stroke="%s" stroke-width="1"/>`,
				lx, ly+2, swatchWidth, swatchWidth, it.color, fallbackOpacity, it.color)
		default:
			fmt.Fprintf(&sb, `<rect x="%d" y="%d" width="%d" height="%d" fill="%s"/>`, lx, ly+2, swatchWidth, swatchWidth, it.color)
		}
		fmt.Fprintf(&sb, `<text x="%d" y="%d">%s</text>`, lx+swatchWidth+6, ly+12, esc(it.label))
	}
	sb.WriteString(`</g>`)

	// Tooltips: one invisible column per point, on top, with its counts.
	sb.WriteString(`<g class="chart-hover" fill="transparent">`)
	for i, t := range s.Times {
		fmt.Fprintf(&sb, `<rect x="%s" y="%d" width="%s" height="%d"><title>%s</title></rect>`,
			num(xAt(i)), titleHeight, num(slot), plotHeight, esc(tooltip(t.In(o.Location), s, o.Elapsed, bars, i)))
	}
	sb.WriteString(`</g></svg>`)
	return template.HTML(sb.String())
}

// Widths of the two drawings of UsageResponsive, in SVG units: the wide
// one is shown from 640 px up (scale about 1 to 1.6), the narrow one below
// (about 0.9 to 1.7 on phones), so text is 11 to 20 px on every screen.
const (
	WideWidth   = 720
	NarrowWidth = 360
)

// UsageResponsive draws s twice, WideWidth and NarrowWidth units wide,
// each in a div the stylesheet shows or hides by screen width
// (.chart-wide, .chart-narrow): text stays readable on a phone and on a
// desktop. o.Width is ignored. Screen readers meet one of them: the other
// is display:none.
func UsageResponsive(s usage.Series, o Options) template.HTML {
	wide, narrow := o, o
	wide.Width, narrow.Width = WideWidth, NarrowWidth
	return template.HTML(`<div class="chart-responsive"><div class="chart-wide">` + string(Usage(s, wide)) +
		`</div><div class="chart-narrow">` + string(Usage(s, narrow)) + `</div></div>`)
}

// makeBars turns s's apps into bars of exactly n points, the apps past
// maxApps summed into one.
func makeBars(s usage.Series, n, maxApps int) []bar {
	var bars []bar
	for i, a := range s.Apps {
		if i < maxApps || len(s.Apps) == maxApps+1 && i == maxApps {
			c := Palette[len(bars)%len(Palette)]
			bars = append(bars, bar{name: a.App, color: c, allowed: fit(a.Allowed, n), denied: fit(a.Denied, n),
				would: fit(a.WouldDeny, n), fbA: fit(a.FallbackAllowed, n), fbR: fit(a.FallbackRefused, n)})
			continue
		}
		if len(bars) == maxApps {
			bars = append(bars, bar{name: fmt.Sprintf("%d other apps", len(s.Apps)-maxApps), color: otherColor,
				allowed: make([]int64, n), denied: make([]int64, n), would: make([]int64, n),
				fbA: make([]int64, n), fbR: make([]int64, n)})
		}
		o := &bars[maxApps]
		for j, v := range fit(a.Allowed, n) {
			o.allowed[j] = addSat(o.allowed[j], v)
		}
		for j, v := range fit(a.Denied, n) {
			o.denied[j] = addSat(o.denied[j], v)
		}
		for j, v := range fit(a.WouldDeny, n) {
			o.would[j] = addSat(o.would[j], v)
		}
		for j, v := range fit(a.FallbackAllowed, n) {
			o.fbA[j] = addSat(o.fbA[j], v)
		}
		for j, v := range fit(a.FallbackRefused, n) {
			o.fbR[j] = addSat(o.fbR[j], v)
		}
	}
	for i := range bars {
		for j := range n {
			// A part of allowed: never more, whatever the input.
			bars[i].would[j] = min(bars[i].would[j], bars[i].allowed[j])
			bars[i].totalA = addSat(bars[i].totalA, bars[i].allowed[j])
			bars[i].totalD = addSat(bars[i].totalD, bars[i].denied[j])
			bars[i].totalW = addSat(bars[i].totalW, bars[i].would[j])
			bars[i].totalFA = addSat(bars[i].totalFA, bars[i].fbA[j])
			bars[i].totalFR = addSat(bars[i].totalFR, bars[i].fbR[j])
		}
	}
	return bars
}

// addSat adds two counts >= 0, stopping at the largest int64 rather than
// wrapping around.
func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// fit copies v into exactly n points, negatives as zero.
func fit(v []int64, n int) []int64 {
	out := make([]int64, n)
	for i := range min(n, len(v)) {
		out[i] = max(v[i], 0)
	}
	return out
}

// describe is the text alternative of the chart.
func describe(s usage.Series, bars []bar, o Options) string {
	loc := o.Location
	var b strings.Builder
	b.WriteString("Allowed " + o.Calls + " per app above the zero line, denied below it")
	var fallbacks bool
	for _, br := range bars {
		if br.totalW > 0 {
			b.WriteString(", the allowed ones that shadow mode would have denied on top in orange")
			break
		}
	}
	for _, br := range bars {
		fallbacks = fallbacks || br.totalFA > 0 || br.totalFR > 0
	}
	if fallbacks {
		b.WriteString(", the calls the failure policy answered while Redis did not, pale: granted on top, refused at the bottom")
	}
	if o.Limit > 0 {
		b.WriteString(", the limit as a dashed line")
	}
	if len(s.Times) > 0 && s.Step > 0 && o.Elapsed {
		fmt.Fprintf(&b, ", one bar per %s over %s", human(s.Step), elapsed(s.Step*time.Duration(len(s.Times))))
	} else if len(s.Times) > 0 && s.Step > 0 {
		fmt.Fprintf(&b, ", one bar per %s from %s to %s (%s)", human(s.Step),
			s.Times[0].In(loc).Format("Jan 2 15:04"), s.Times[len(s.Times)-1].Add(s.Step).In(loc).Format("Jan 2 15:04"),
			loc.String())
	}
	b.WriteString(".")
	for _, br := range bars {
		fmt.Fprintf(&b, " %s: %s allowed%s, %s denied%s.", br.name, Count(br.totalA), wouldText(br.totalW), Count(br.totalD),
			fallbackText(br.totalFA, br.totalFR))
	}
	return b.String()
}

func tooltip(t time.Time, s usage.Series, isElapsed bool, bars []bar, i int) string {
	var b strings.Builder
	step := s.Step
	switch {
	case isElapsed:
		b.WriteString(elapsed(t.Sub(s.Times[0])) + " to " + elapsed(t.Add(step).Sub(s.Times[0])))
	default:
		b.WriteString(t.Format("Mon Jan 2 15:04"))
		if step > 0 {
			b.WriteString("–" + t.Add(step).Format("15:04"))
		}
	}
	for _, br := range bars {
		if br.allowed[i] == 0 && br.denied[i] == 0 && br.fbA[i] == 0 && br.fbR[i] == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n%s: %s allowed%s, %s denied%s", br.name, Count(br.allowed[i]), wouldText(br.would[i]), Count(br.denied[i]),
			fallbackText(br.fbA[i], br.fbR[i]))
	}
	return b.String()
}

// wouldText is the would-deny part of an allowed count in words, "" for none.
func wouldText(w int64) string {
	if w <= 0 {
		return ""
	}
	return " (" + Count(w) + " would deny)"
}

// fallbackText is the failure policy's answers in words, "" for none.
func fallbackText(granted, refused int64) string {
	if granted <= 0 && refused <= 0 {
		return ""
	}
	return "; failure policy: " + Count(granted) + " granted, " + Count(refused) + " refused"
}

// labelEvery picks the spacing of time labels: the smallest of a few
// round spans that gives at most most labels.
func labelEvery(step time.Duration, n, most int) time.Duration {
	span := step * time.Duration(n)
	for _, d := range []time.Duration{time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second,
		30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute,
		20 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour, 3 * time.Hour, 4 * time.Hour, 6 * time.Hour,
		12 * time.Hour, 24 * time.Hour} {
		if d >= step && span/d <= time.Duration(most) {
			return d
		}
	}
	days := 1 + span/(time.Duration(most)*24*time.Hour)
	return 24 * time.Hour * days
}

// aligned reports whether wall-clock time t is a multiple of every since
// midnight (every up to a day), or a midnight (longer spans).
func aligned(t time.Time, every time.Duration) bool {
	if every <= 0 {
		return false
	}
	sinceMidnight := time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute + time.Duration(t.Second())*time.Second
	if every >= 24*time.Hour {
		return sinceMidnight == 0 && (t.YearDay()-1)%int(every/(24*time.Hour)) == 0
	}
	return sinceMidnight%every == 0
}

// niceStep returns a round step (1, 2 or 5 times a power of ten, at least 1) >= x.
func niceStep(x float64) float64 {
	if x <= 1 || math.IsNaN(x) {
		return 1
	}
	if math.IsInf(x, 1) {
		return math.MaxFloat64
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= x {
			return m * p
		}
	}
	return 10 * p
}

// compact formats an axis value: 950, 1.5k, 20M.
func compact(v float64) string {
	switch {
	case v >= 1e9:
		return trim(v/1e9) + "G"
	case v >= 1e6:
		return trim(v/1e6) + "M"
	case v >= 1e3:
		return trim(v/1e3) + "k"
	}
	return trim(v)
}

func trim(v float64) string { return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) }

// Count formats a count with thousands separators: 1,234,567.
func Count(v int64) string {
	s := strconv.FormatInt(v, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// elapsed names an offset: "+0 s", "+45 s", "+2 min", "+1 min 30 s".
func elapsed(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d < time.Minute:
		return "+" + strconv.Itoa(int(d/time.Second)) + " s"
	case d%time.Minute == 0:
		return "+" + strconv.Itoa(int(d/time.Minute)) + " min"
	}
	return "+" + strconv.Itoa(int(d/time.Minute)) + " min " + strconv.Itoa(int(d%time.Minute/time.Second)) + " s"
}

// human names a step: "second", "minute", "15 minutes", "hour".
func human(d time.Duration) string {
	switch {
	case d == time.Second:
		return "second"
	case d == time.Minute:
		return "minute"
	case d == time.Hour:
		return "hour"
	case d%time.Hour == 0:
		return strconv.Itoa(int(d/time.Hour)) + " hours"
	case d%time.Minute == 0:
		return strconv.Itoa(int(d/time.Minute)) + " minutes"
	}
	return d.String()
}

// num formats a coordinate with at most two decimals.
func num(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "0"
	}
	return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64)
}

// esc makes s safe as SVG text and attribute value, also in a standalone
// SVG document: markup characters are escaped, and characters XML forbids
// (most control characters, invalid UTF-8) become U+FFFD.
func esc(s string) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r == utf8.RuneError, r < 0x20 && r != '\t' && r != '\n' && r != '\r', r == 0xFFFE, r == 0xFFFF:
			return '\uFFFD'
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
	return html.EscapeString(s)
}
