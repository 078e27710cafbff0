package chart

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/buckets"
)

func TestSparkline(t *testing.T) {
	allowed := make([]int64, 60)
	denied := make([]int64, 60)
	allowed[0], allowed[59] = 100, 50
	denied[59] = 1 // one denial next to many allowed must still show
	out := string(Sparkline(allowed, denied, nil))
	checkSafe(t, out)
	if !strings.Contains(out, `aria-label="150 allowed, 1 denied (0.7%)"`) {
		t.Errorf("label missing:\n%s", out)
	}
	rects := regexp.MustCompile(`<rect class="sparkline-(allowed|denied)" x="([\d.]+)" y="([\d.]+)" width="[\d.]+" height="([\d.]+)" fill="([^"]+)"/>`).FindAllStringSubmatch(out, -1)
	if len(rects) != 3 {
		t.Fatalf("%d columns, want 3:\n%s", len(rects), out)
	}
	h := func(r []string) float64 { v, _ := strconv.ParseFloat(r[4], 64); return v }
	if rects[0][1] != "allowed" || h(rects[0]) != 23 || rects[0][5] != Palette[0] {
		t.Errorf("busiest column %v, want allowed, full height, %s", rects[0], Palette[0])
	}
	if rects[2][1] != "denied" || rects[2][5] != DeniedColor || h(rects[2]) < 1 {
		t.Errorf("denied column %v, want %s and at least 1 high", rects[2], DeniedColor)
	}
	// The denied column sits on top of the allowed one of its minute.
	ya, _ := strconv.ParseFloat(rects[1][3], 64)
	yd, _ := strconv.ParseFloat(rects[2][3], 64)
	if math.Abs(yd+h(rects[2])-ya) > 0.01 {
		t.Errorf("denied column ends at %v, allowed starts at %v", yd+h(rects[2]), ya)
	}

	for _, tc := range []struct{ a, d []int64 }{{nil, nil}, {[]int64{-1, 0}, []int64{0}}, {[]int64{math.MaxInt64, math.MaxInt64}, []int64{math.MaxInt64}}} {
		out := string(Sparkline(tc.a, tc.d, nil))
		checkSafe(t, out)
		if strings.Contains(out, "NaN") || strings.Contains(out, "Inf") {
			t.Errorf("Sparkline(%v, %v) has non-numbers: %s", tc.a, tc.d, out)
		}
	}
	if out := string(Sparkline(nil, nil, nil)); !strings.Contains(out, `aria-label="No acquires"`) || strings.Contains(out, "<rect") {
		t.Errorf("empty sparkline: %s", out)
	}
}

func TestShare(t *testing.T) {
	for _, tc := range []struct {
		a, d int64
		want string
	}{{0, 0, "0%"}, {10, 0, "0%"}, {9999, 1, "<0.1%"}, {957, 43, "4.3%"}, {1, 9999, ">99.9%"}, {0, 5, "100%"}, {-5, 5, "100%"}} {
		if got := Share(tc.a, tc.d); got != tc.want {
			t.Errorf("Share(%d, %d) = %q, want %q", tc.a, tc.d, got, tc.want)
		}
	}
}

func TestGauge(t *testing.T) {
	out := string(Gauge(7.884, 10))
	checkSafe(t, out)
	for _, want := range []string{`aria-valuenow="7"`, `aria-valuemax="10"`, `7 of 10 tokens available`, `data-capacity="10"`,
		`class="gauge-fill" x="0" y="0" width="78.84" height="10" fill="` + Palette[0] + `"`} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in %s", want, out)
		}
	}
	if strings.Contains(out, "7.88") && !strings.Contains(out, "78.84") {
		t.Error("a fraction of a token is shown")
	}
	if out := string(Gauge(0.6, 10)); !strings.Contains(out, `fill="`+DeniedColor+`" data-low-fill`) || !strings.Contains(out, "0 of 10") {
		t.Errorf("an empty bucket is not drawn in the denied colour: %s", out)
	}
	for _, tc := range []struct {
		tokens float64
		cap    int64
		width  string
	}{{math.NaN(), 10, "0"}, {-3, 10, "0"}, {50, 10, "100"}, {math.Inf(1), 10, "100"}, {5, 0, "0"}, {5, -1, "0"}, {1e9, 1e9, "100"}} {
		out := string(Gauge(tc.tokens, tc.cap))
		checkSafe(t, out)
		if !strings.Contains(out, `class="gauge-fill" x="0" y="0" width="`+tc.width+`"`) || strings.Contains(out, "NaN") {
			t.Errorf("Gauge(%v, %d): want width %s: %s", tc.tokens, tc.cap, tc.width, out)
		}
	}
}

func TestPreview(t *testing.T) {
	r, err := buckets.ParseRate("5/s")
	if err != nil {
		t.Fatal(err)
	}
	sim, err := buckets.Simulate(10, 0, r, buckets.Pattern{Steady: 10, Duration: 90 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	out := string(Preview(sim, r, ""))
	for _, svg := range regexp.MustCompile(`(?s)<svg.*?</svg>`).FindAllString(out, -1) {
		checkSafe(t, svg)
	}
	for _, want := range []string{">+0 s<", ">+1 min<", ">sustained: 5 per second<", `<g class="chart-limit">`,
		"requests: " + Count(sim.TotalAllowed) + " allowed, " + Count(sim.TotalDenied) + " denied",
		"+30 s to +31 s\nrequests: 5 allowed, 5 denied"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q", want)
		}
	}
	if strings.Contains(out, "1970") || strings.Contains(out, "00:0") {
		t.Error("a preview shows a time of day")
	}
	if out := string(Preview(buckets.Simulation{}, buckets.Rate{}, "x")); !strings.Contains(out, "No acquires") || strings.Contains(out, "chart-limit") {
		t.Errorf("empty preview: %s", out)
	}
	// A slow rate is said as given, never "0 per second".
	slow, _ := buckets.ParseRate("1/hour")
	sim, err = buckets.Simulate(3, 0, slow, buckets.Pattern{Steady: 1, Duration: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	out = string(Preview(sim, slow, ""))
	if !strings.Contains(out, "sustained: 1 per hour") || strings.Contains(out, "sustained: 0 per") || !strings.Contains(out, ">allowed per second ↑<") {
		t.Errorf("a preview of 1/hour: %s", out)
	}
}

func TestSparklineWouldDeny(t *testing.T) {
	out := string(Sparkline([]int64{10, 4}, []int64{0, 2}, []int64{5, 9}))
	checkSafe(t, out)
	would := regexp.MustCompile(`<rect class="sparkline-would" [^>]*fill="`+WouldDenyColor+`"/>`).FindAllString(out, -1)
	if len(would) != 2 {
		t.Fatalf("%d would-deny columns, want 2:\n%s", len(would), out)
	}
	if !strings.Contains(out, `aria-label="14 allowed (9 would deny), 2 denied (12.5%)"`) {
		t.Errorf("label does not count would-deny (9 cut to the 4 allowed):\n%s", out)
	}
	if out := string(Sparkline([]int64{1}, nil, nil)); strings.Contains(out, "sparkline-would") {
		t.Error("a sparkline without would-deny counts draws some")
	}
}
