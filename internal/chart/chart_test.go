package chart

import (
	"encoding/xml"
	"errors"
	"io"
	"regexp"
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
	if elems["title"] != 61 { // the chart's own, and one per point
		t.Errorf("%d title elements, want 61", elems["title"])
	}
	for _, want := range []string{
		`<title>Usage of search, last hour</title>`,
		`web: 15 allowed, 5 denied`,
		`batch: 5 allowed, 5 denied`,
		`>allowed ↑<`, `>denied ↓<`,
		`>10:00<`, `>10:10<`, `>10:50<`,
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
	// A week is labelled by day, at midnight in the chosen zone.
	week := regexp.MustCompile(`>(Mon|Tue|Wed|Thu|Fri|Sat|Sun) \d+<`).FindAllString(out, -1)
	if len(week) != 7 {
		t.Errorf("week labels %v, want 7 days", week)
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
