package chart

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/usage"
)

// series builds a Series of n points of step from start.
func series(start time.Time, step time.Duration, n int, apps ...usage.AppSeries) usage.Series {
	s := usage.Series{Bucket: "search", Window: usage.Hour, Step: step}
	for i := range n {
		s.Times = append(s.Times, start.Add(time.Duration(i)*step))
	}
	s.Apps = apps
	return s
}

// parse checks that svg is well-formed XML with an svg root, and returns
// the elements by name and every attribute name seen.
func parse(t *testing.T, svg string) (elems map[string]int, attrs map[string]bool) {
	t.Helper()
	elems, attrs = map[string]int{}, map[string]bool{}
	d := xml.NewDecoder(strings.NewReader(svg))
	root := ""
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed: %v\n%s", err, svg)
		}
		if se, ok := tok.(xml.StartElement); ok {
			if root == "" {
				root = se.Name.Local
			}
			elems[se.Name.Local]++
			for _, a := range se.Attr {
				attrs[a.Name.Local] = true
			}
		}
	}
	if root != "svg" {
		t.Fatalf("root element %q, want svg", root)
	}
	return elems, attrs
}

// checkSafe asserts what a strict CSP needs: no script, no style, no
// event handlers, no links out.
func checkSafe(t *testing.T, svg string) {
	t.Helper()
	elems, attrs := parse(t, svg)
	for _, e := range []string{"script", "style", "foreignObject", "a", "image", "use"} {
		if elems[e] > 0 {
			t.Errorf("has a %s element", e)
		}
	}
	for a := range attrs {
		if a == "style" || a == "href" || strings.HasPrefix(a, "on") {
			t.Errorf("has a %s attribute", a)
		}
	}
}

func TestUsageStructure(t *testing.T) {
	start := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
	s := series(start, time.Minute, 60,
		usage.AppSeries{App: "web", Allowed: make([]int64, 60), Denied: make([]int64, 60)},
		usage.AppSeries{App: "batch", Allowed: make([]int64, 60), Denied: make([]int64, 60)},
	)
	s.Apps[0].Allowed[0], s.Apps[0].Allowed[1], s.Apps[0].Denied[1] = 10, 5, 5
	s.Apps[1].Allowed[1], s.Apps[1].Denied[1] = 5, 5
	for i := range s.Apps {
		for j := range 60 {
			s.Apps[i].TotalAllowed += s.Apps[i].Allowed[j]
			s.Apps[i].TotalDenied += s.Apps[i].Denied[j]
		}
	}
	out := string(Usage(s, Options{}))
	checkSafe(t, out)
	elems, _ := parse(t, out)
	if got := strings.Count(out, `class="chart-allowed"`); got != 3 {
		t.Errorf("%d allowed bars, want 3", got)
	}
	if got := strings.Count(out, `class="chart-denied"`); got != 2 {
		t.Errorf("%d denied bars, want 2", got)
	}
	// Scale: 10 allowed and 10 denied at most: 0..10 up and down, the
	// 200-unit plot split in two; 10 allowed is a full 100-unit bar.
	if !strings.Contains(out, `y="34" width="9.77" height="100"/>`) {
		t.Errorf("the bar of 10 allowed is not 100 units from the top:\n%s", out)
	}
	if elems["title"] != 67 { // the chart's own, one per point, one per time label (UTC on hover)
		t.Errorf("%d title elements, want 67", elems["title"])
	}
	for _, want := range []string{
		`<title>Usage of search, last hour</title>`,
		`web: 15 allowed, 5 denied`,
		`batch: 5 allowed, 5 denied`,
		`>allowed ↑<`, `>denied ↓<`,
		`>10:00<`, `>10:10<`, `>10:50<`, `data-t="2026-03-04T10:10:00Z" data-f="time">10:10<title>2026-03-04 10:10 UTC</title>`,
		"Wed Mar 4 10:01–10:02\nweb: 5 allowed, 5 denied\nbatch: 5 allowed, 5 denied",
		`role="img"`,
		`fill="currentColor"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q", want)
		}
	}
	if strings.Contains(out, ">10:05<") {
		t.Error("labels every 5 minutes over an hour: too crowded")
	}
	// Apps keep their palette colour, in order of traffic.
	if !strings.Contains(out, `<g class="chart-app" fill="`+Palette[0]+`">`) ||
		!strings.Contains(out, `<g class="chart-app" fill="`+Palette[1]+`">`) {
		t.Error("apps are not drawn in the palette's colours")
	}
}

func TestUsageEscapes(t *testing.T) {
	start := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
	s := series(start, time.Minute, 3, usage.AppSeries{App: `<b onclick="x">&"'`, Allowed: []int64{1, 2, 3}})
	s.Bucket = "</svg><script>alert(1)</script>"
	out := string(Usage(s, Options{Title: "a < b & \"c\" \x00\xff 'd'"}))
	checkSafe(t, out)
	for _, bad := range []string{"<script", "<b ", `"x"`, "\x00", "\xff"} {
		if strings.Contains(out, bad) {
			t.Errorf("output contains %q unescaped", bad)
		}
	}
	for _, want := range []string{`a &lt; b &amp; &#34;c&#34; �� &#39;d&#39;`, `&lt;b onclick=&#34;x&#34;&gt;&amp;&#34;&#39;`} {
		if !strings.Contains(out, want) {
			t.Errorf("missing escaped %q", want)
		}
	}
}

func TestUsageOtherApps(t *testing.T) {
	start := time.Date(2026, 3, 4, 0, 0, 0, 0, time.UTC)
	var apps []usage.AppSeries
	for _, name := range []string{"a1", "a2", "a3", "a4", "a5"} {
		apps = append(apps, usage.AppSeries{App: name, Allowed: []int64{1, 1}, Denied: []int64{0, 1}})
	}
	out := string(Usage(series(start, time.Hour, 2, apps...), Options{MaxApps: 2}))
	checkSafe(t, out)
	if !strings.Contains(out, "3 other apps: 6 allowed, 3 denied") || strings.Contains(out, "a3:") {
		t.Errorf("the quietest apps are not summed:\n%s", out)
	}
	if got := strings.Count(out, `class="chart-app"`); got != 3 {
		t.Errorf("%d app groups, want 3", got)
	}
	// One app past the limit keeps its own name rather than "1 other apps".
	out = string(Usage(series(start, time.Hour, 2, apps[:3]...), Options{MaxApps: 2}))
	if strings.Contains(out, "other apps") || !strings.Contains(out, "a3: 2 allowed") {
		t.Errorf("a single app past the limit was renamed:\n%s", out)
	}
}

func TestUsageEmptyAndOdd(t *testing.T) {
	start := time.Date(2026, 3, 4, 0, 0, 0, 0, time.UTC)
	cases := map[string]usage.Series{
		"zero":   {},
		"empty":  series(start, time.Hour, 168),
		"short":  series(start, 15*time.Minute, 96, usage.AppSeries{App: "a", Allowed: []int64{1}, Denied: []int64{-5, 3, 4, 5}}),
		"long":   series(start, time.Minute, 2, usage.AppSeries{App: "a", Allowed: []int64{1, 2, 3, 4}}),
		"huge":   series(start, time.Minute, 2, usage.AppSeries{App: "a", Allowed: []int64{1 << 62, 1 << 62}, Denied: []int64{1 << 62, 0}}),
		"nostep": {Times: []time.Time{start, start}, Apps: []usage.AppSeries{{App: "a", Allowed: []int64{1, 1}}}},
	}
	for name, s := range cases {
		t.Run(name, func(t *testing.T) {
			out := string(Usage(s, Options{Width: -5, Location: time.FixedZone("X", 5*3600+45*60)}))
			checkSafe(t, out)
			if strings.Contains(out, "NaN") || strings.Contains(out, "Inf") {
				t.Errorf("non-numbers in the output:\n%s", out)
			}
		})
	}
	out := string(Usage(cases["empty"], Options{}))
	if !strings.Contains(out, "No acquires counted in this window") {
		t.Error("an empty chart does not say so")
	}
	// An empty chart is a short box, not a full-height empty grid.
	if h := viewBoxHeight(t, out); h > 80 {
		t.Errorf("empty chart is %v units high, want at most 80", h)
	}
	if strings.Contains(out, "chart-grid") {
		t.Error("an empty chart draws a grid")
	}

	// A week is labelled by day, at midnight in the chosen zone: every
	// day when wide, every other day when narrow.
	weekly := series(start, time.Hour, 168, usage.AppSeries{App: "a", Allowed: []int64{1}})
	for width, want := range map[int]int{WideWidth: 7, NarrowWidth: 4} {
		out = string(Usage(weekly, Options{Width: width}))
		week := regexp.MustCompile(`>(Mon|Tue|Wed|Thu|Fri|Sat|Sun) \d+<`).FindAllString(out, -1)
		if len(week) != want {
			t.Errorf("width %d: week labels %v, want %d days", width, week, want)
		}
	}
}

// viewBoxHeight returns the height of an svg's viewBox.
func viewBoxHeight(t *testing.T, svg string) float64 {
	t.Helper()
	m := regexp.MustCompile(`viewBox="0 0 (\d+) (\d+)"`).FindStringSubmatch(svg)
	if m == nil {
		t.Fatalf("no viewBox in %s", svg)
	}
	h, _ := strconv.ParseFloat(m[2], 64)
	return h
}

// TestUsageColours checks that denied acquires are drawn in DeniedColor
// only, and that no allowed colour is it or close to it.
func TestUsageColours(t *testing.T) {
	start := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
	out := string(Usage(series(start, time.Minute, 3,
		usage.AppSeries{App: "web", Allowed: []int64{5, 1, 0}, Denied: []int64{0, 2, 1}},
		usage.AppSeries{App: "batch", Allowed: []int64{1, 1, 1}, Denied: []int64{1, 0, 0}}), Options{}))
	denied := regexp.MustCompile(`<rect class="chart-denied"[^>]*>`).FindAllString(out, -1)
	if len(denied) != 3 {
		t.Fatalf("%d denied bars, want 3", len(denied))
	}
	for _, r := range denied {
		if !strings.Contains(r, `fill="`+DeniedColor+`"`) || strings.Contains(r, "opacity") {
			t.Errorf("denied bar %s is not drawn in %s", r, DeniedColor)
		}
	}
	if !strings.Contains(out, `fill="`+DeniedColor+`"/><text x="`) || !strings.Contains(out, ">denied: 4<") {
		t.Error("the legend has no denied swatch with the total")
	}
	for _, c := range Palette {
		if strings.EqualFold(c, DeniedColor) || strings.EqualFold(c, otherColor) {
			t.Errorf("palette colour %s is the denied or other colour", c)
		}
	}
}

func TestUsageLimit(t *testing.T) {
	start := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
	s := series(start, time.Minute, 2, usage.AppSeries{App: "web", Allowed: []int64{10, 20}})
	if got := Sustained(5, time.Minute); got != 300 {
		t.Fatalf("Sustained(5/s, 1m) = %v, want 300", got)
	}
	out := string(Usage(s, Options{Limit: 60, LimitLabel: "limit: 60 per minute", Unit: "per minute"}))
	checkSafe(t, out)
	m := regexp.MustCompile(`<g class="chart-limit"><line x1="\d+" x2="\d+" y1="([\d.]+)" y2="([\d.]+)"`).FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, ">limit: 60 per minute<") || !strings.Contains(out, ">allowed per minute ↑<") {
		t.Fatalf("no labelled limit line:\n%s", out)
	}
	// The scale grows to hold the limit: its line is inside the plot, above the bars.
	ly, _ := strconv.ParseFloat(m[1], 64)
	if ly < titleHeight || ly > titleHeight+plotHeight/2 {
		t.Errorf("limit line at y=%v, want in the upper half of the plot", ly)
	}
	if strings.Contains(string(Usage(s, Options{})), "chart-limit") {
		t.Error("a limit line without a limit")
	}
	// A limit far above the traffic is not drawn: the scale follows the
	// data, and the legend says where the limit is.
	out = string(Usage(s, Options{Limit: 300, LimitLabel: "limit: 300 per minute"}))
	if strings.Contains(out, `<g class="chart-limit">`) || !strings.Contains(out, ">limit: 300 per minute (above the scale)<") {
		t.Errorf("a far limit is drawn or not named:\n%s", out)
	}
	if strings.Contains(out, ">300<") || strings.Contains(out, ">250<") {
		t.Error("the scale reaches up to a limit that is not drawn")
	}
	for _, bad := range []float64{math.NaN(), math.Inf(1), -3} {
		if out := string(Usage(s, Options{Limit: bad})); strings.Contains(out, "chart-limit") || strings.Contains(out, "NaN") {
			t.Errorf("limit %v drawn", bad)
		}
	}
	for _, tc := range [][2]float64{{-1, 60}, {0, 60}, {math.NaN(), 60}, {math.Inf(1), 60}, {1, 0}} {
		if got := Sustained(tc[0], time.Duration(tc[1])*time.Second); got != 0 {
			t.Errorf("Sustained%v = %v, want 0", tc, got)
		}
	}
}

func TestUsageResponsive(t *testing.T) {
	start := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
	s := series(start, time.Minute, 60, usage.AppSeries{App: "web", Allowed: []int64{10, 20}, Denied: []int64{0, 3}})
	out := string(UsageResponsive(s, Options{Width: 9999}))
	if !strings.HasPrefix(out, `<div class="chart-responsive"><div class="chart-wide"><svg`) ||
		!strings.Contains(out, `</svg></div><div class="chart-narrow"><svg`) || !strings.HasSuffix(out, `</svg></div></div>`) {
		t.Fatalf("unexpected structure:\n%.300s", out)
	}
	for _, w := range []int{WideWidth, NarrowWidth} {
		if !strings.Contains(out, fmt.Sprintf(`viewBox="0 0 %d `, w)) {
			t.Errorf("no drawing %d units wide", w)
		}
	}
	// Every drawing scales to its box: no fixed width in pixels.
	if regexp.MustCompile(`<svg[^>]* width="[\d.]+(px)?"`).MatchString(out) {
		t.Error("an svg has a fixed width")
	}
}

func TestNiceStep(t *testing.T) {
	for in, want := range map[float64]float64{0: 1, 0.3: 1, 1: 1, 1.5: 2, 3: 5, 7: 10, 12: 20, 250: 500, 4e6: 5e6} {
		if got := niceStep(in); got != want {
			t.Errorf("niceStep(%v) = %v, want %v", in, got, want)
		}
	}
	for in, want := range map[float64]string{0: "0", 950: "950", 1500: "1.5k", 2e7: "20M", 3.25e9: "3.3G"} {
		if got := compact(in); got != want {
			t.Errorf("compact(%v) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -1234: "-1,234"} {
		if got := Count(in); got != want {
			t.Errorf("Count(%v) = %q, want %q", in, got, want)
		}
	}
}

func FuzzUsage(f *testing.F) {
	f.Add("title", "app", int64(3), int64(1), 10)
	f.Add("<script>", "a&b", int64(-1), int64(1<<62), 0)
	f.Add("\x00\xfe", "", int64(0), int64(0), 500)
	f.Fuzz(func(t *testing.T, title, app string, a, d int64, n int) {
		n = min(max(n, 0), 500)
		start := time.Date(2026, 3, 4, 0, 0, 0, 0, time.UTC)
		s := series(start, time.Minute, n, usage.AppSeries{App: app, Allowed: []int64{a, a, a}, Denied: []int64{d}})
		out := string(Usage(s, Options{Title: title}))
		checkSafe(t, out)
	})
}

// Would-deny counts (shadow mode) are drawn apart: on top of the allowed
// stack, in their own colour, with a legend entry and counts in the
// tooltip, in the wide and the narrow drawing; the bars still add up to
// the allowed counts.
func TestUsageWouldDeny(t *testing.T) {
	start := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
	s := series(start, time.Minute, 3,
		usage.AppSeries{App: "web", Allowed: []int64{10, 10, 4}, WouldDeny: []int64{0, 4, 9}, Denied: []int64{0, 0, 1}},
		usage.AppSeries{App: "batch", Allowed: []int64{0, 6, 0}, WouldDeny: []int64{0, 2, 0}})
	for _, width := range []int{WideWidth, NarrowWidth} {
		out := string(Usage(s, Options{Width: width}))
		checkSafe(t, out)
		would := regexp.MustCompile(`<rect class="chart-would" x="[\d.]+" y="([\d.]+)" width="[\d.]+" height="([\d.]+)"/>`).
			FindAllStringSubmatch(out, -1)
		if len(would) != 2 {
			t.Fatalf("width %d: %d would-deny bars, want 2 (points 1 and 2):\n%s", width, len(would), out)
		}
		if !strings.Contains(out, `<g class="chart-would-deny" fill="`+WouldDenyColor+`">`) {
			t.Errorf("width %d: would-deny bars not in %s", width, WouldDenyColor)
		}
		// Point 1: 16 allowed of which 6 would deny; the would-deny bar's
		// top is the top of the 16 and its height 6/16 of the stack.
		allowedTop := regexp.MustCompile(`<rect class="chart-allowed" x="[\d.]+" y="([\d.]+)" width="[\d.]+" height="([\d.]+)"/>`).
			FindAllStringSubmatch(out, -1)
		var stack float64
		for _, m := range allowedTop {
			h, _ := strconv.ParseFloat(m[2], 64)
			stack += h
		}
		wh1, _ := strconv.ParseFloat(would[0][2], 64)
		wh2, _ := strconv.ParseFloat(would[1][2], 64)
		// Allowed bars hold what would not deny: 10 + 6 + 4 + 0 = 20 of the
		// 30 allowed; would-deny bars the other 10 (6 and 4, the 9 cut to
		// the 4 allowed).
		if r := (wh1 + wh2) / (stack + wh1 + wh2); r < 0.33 || r > 0.34 {
			t.Errorf("width %d: would-deny bars are %.3f of the allowed height, want 10/30", width, r)
		}
		if r := wh1 / wh2; r < 1.49 || r > 1.51 {
			t.Errorf("width %d: would-deny bars %v and %v, want 6 to 4", width, wh1, wh2)
		}
		for _, want := range []string{
			`fill="` + WouldDenyColor + `"/><text x="`, ">would deny (shadow mode): 10<",
			"web: 10 allowed (4 would deny), 0 denied", "batch: 6 allowed (2 would deny), 0 denied",
			"would have denied on top in orange",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("width %d: missing %q", width, want)
			}
		}
	}
	for _, c := range Palette {
		if strings.EqualFold(c, WouldDenyColor) {
			t.Errorf("palette colour %s is the would-deny colour", c)
		}
	}
	// Without would-deny counts there is no such legend entry, unless the
	// bucket is in shadow mode.
	plain := series(start, time.Minute, 2, usage.AppSeries{App: "web", Allowed: []int64{1, 2}})
	if out := string(Usage(plain, Options{})); strings.Contains(out, "would deny") || strings.Contains(out, WouldDenyColor) {
		t.Error("a chart without would-deny counts names them")
	}
	if out := string(Usage(plain, Options{Shadow: true})); !strings.Contains(out, ">would deny (shadow mode): 0<") {
		t.Error("a shadow-mode bucket's chart does not name would-deny in its legend")
	}
}

// The failure policy's answers are a series of their own: granted on top
// of the allowed stack, refused under the denied one, pale, in the legend
// and the tooltips; a chart with nothing else is not empty; one without
// them does not name them.
func TestUsageFallback(t *testing.T) {
	start := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
	s := series(start, time.Minute, 3,
		usage.AppSeries{App: "web", Allowed: []int64{10, 0, 4}, Denied: []int64{2, 0, 0},
			FallbackAllowed: []int64{0, 5, 0}, FallbackRefused: []int64{0, 20, 3}})
	for _, width := range []int{WideWidth, NarrowWidth} {
		out := string(Usage(s, Options{Width: width}))
		checkSafe(t, out)
		rects := func(class string) [][]string {
			return regexp.MustCompile(`<rect class="`+class+`" x="[\d.]+" y="([\d.]+)" width="[\d.]+" height="([\d.]+)"`).
				FindAllStringSubmatch(out, -1)
		}
		granted, refused, denied := rects("chart-fallback-granted"), rects("chart-fallback-refused"), rects("chart-denied")
		if len(granted) != 1 || len(refused) != 2 || len(denied) != 1 {
			t.Fatalf("width %d: %d granted and %d refused by the policy, %d denied bars; want 1, 2, 1:\n%s",
				width, len(granted), len(refused), len(denied), out)
		}
		// Point 1: 20 refused by the policy against 2 denied at point 0.
		h := func(m []string) float64 { v, _ := strconv.ParseFloat(m[2], 64); return v }
		if r := h(refused[0]) / h(denied[0]); r < 9.9 || r > 10.1 {
			t.Errorf("width %d: refused by the policy %v high, denied %v, want 10 to 1", width, h(refused[0]), h(denied[0]))
		}
		for _, want := range []string{
			">granted by the failure policy: 5<", ">refused by the failure policy: 23<",
			"web: 0 allowed, 0 denied; failure policy: 5 granted, 20 refused",
			"the calls the failure policy answered while Redis did not",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("width %d: missing %q", width, want)
			}
		}
	}
	only := series(start, time.Minute, 2, usage.AppSeries{App: "web", FallbackRefused: []int64{0, 4}})
	if out := string(Usage(only, Options{})); strings.Contains(out, "chart-is-empty") || !strings.Contains(out, "chart-fallback-refused") {
		t.Error("a chart of the failure policy's refusals alone is drawn empty")
	}
	plain := series(start, time.Minute, 2, usage.AppSeries{App: "web", Allowed: []int64{1, 2}})
	if out := string(Usage(plain, Options{})); strings.Contains(out, "failure policy") {
		t.Error("a chart without the failure policy's answers names them")
	}
}
