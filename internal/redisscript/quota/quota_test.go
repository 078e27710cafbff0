package quota

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/redisscript/tokens"
)

func zone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := LoadZone(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func utc(s string) int64 {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.Unix()
}

// TestBerlinMonthsAcrossDST checks the monthly and daily boundaries of
// Europe/Berlin around the changes of October and March: a month starts
// at local midnight of its first day, in the offset of that day.
func TestBerlinMonthsAcrossDST(t *testing.T) {
	berlin := zone(t, "Europe/Berlin")
	at := time.Unix(utc("2025-10-15T12:00:00Z"), 0)
	got := Table(Month, berlin, at)
	want := []int64{
		utc("2025-08-31T22:00:00Z"), // 1 Sep 00:00 CEST
		utc("2025-09-30T22:00:00Z"), // 1 Oct 00:00 CEST
		utc("2025-10-31T23:00:00Z"), // 1 Nov 00:00 CET: the change of 26 Oct is inside October
		utc("2025-11-30T23:00:00Z"),
		utc("2025-12-31T23:00:00Z"),
		utc("2026-01-31T23:00:00Z"),
	}
	if !equal(got, want) {
		t.Errorf("months around 2025-10-15 in Berlin:\n got %v\nwant %v", got, want)
	}
	// March: 1 Apr starts in CEST.
	got = Table(Month, berlin, time.Unix(utc("2026-03-20T00:00:00Z"), 0))
	if got[2] != utc("2026-03-31T22:00:00Z") || got[1] != utc("2026-02-28T23:00:00Z") {
		t.Errorf("months around March 2026: %v", got)
	}
	// The days of the changes last 25 and 23 hours.
	d := Table(Day, berlin, time.Unix(utc("2025-10-26T12:00:00Z"), 0))
	if d[1] != utc("2025-10-25T22:00:00Z") || d[2]-d[1] != 25*3600 {
		t.Errorf("26 Oct 2025 in Berlin: %v, want a day of 25 h from 2025-10-25T22:00Z", d)
	}
	d = Table(Day, berlin, time.Unix(utc("2026-03-29T12:00:00Z"), 0))
	if d[1] != utc("2026-03-28T23:00:00Z") || d[2]-d[1] != 23*3600 {
		t.Errorf("29 Mar 2026 in Berlin: %v, want a day of 23 h", d)
	}
	// Hours stay an hour long: the repeated 02:00 of October is two hours.
	h := Table(Hour, berlin, time.Unix(utc("2025-10-26T00:30:00Z"), 0))
	for i := 1; i < len(h); i++ {
		if h[i]-h[i-1] != 3600 {
			t.Fatalf("hours around the October change: %v", h)
		}
	}
}

// TestTableAgainstMinutes compares the boundaries of every period with
// those found by walking the local calendar minute by minute for a year,
// in zones with changes at 02:00, at midnight (a skipped and a doubled
// midnight), by half an hour, and with none.
func TestTableAgainstMinutes(t *testing.T) {
	for _, tc := range []struct {
		zone, from string
	}{
		{"Europe/Berlin", "2025-01-01T00:00:00Z"},
		{"America/Sao_Paulo", "2018-06-01T00:00:00Z"}, // 2018-11-04 skips midnight; 2019-02-17 repeats 23:00
		{"America/Havana", "2024-06-01T00:00:00Z"},    // 2024-11-03 repeats midnight
		{"Australia/Lord_Howe", "2025-01-01T00:00:00Z"},
		{"Asia/Kolkata", "2025-01-01T00:00:00Z"},
		{"UTC", "2025-01-01T00:00:00Z"},
	} {
		loc := zone(t, tc.zone)
		from := time.Unix(utc(tc.from), 0)
		for _, p := range Periods {
			if p == Hour && tc.zone == "Australia/Lord_Howe" {
				continue // a change of half an hour moves minute 0 (see Start)
			}
			var walked []int64
			var prev label
			for m := 0; m < 366*24*60; m++ {
				u := from.Add(time.Duration(m) * time.Minute)
				l := labelOf(p, u.In(loc))
				if m > 0 && l != prev {
					walked = append(walked, u.Unix())
				}
				prev = l
			}
			// The same boundaries, from tables computed along the year.
			var tabled []int64
			seen := map[int64]bool{}
			for s := from; s.Before(from.Add(366 * 24 * time.Hour)); s = s.Add(6 * time.Hour) {
				for _, b := range Table(p, loc, s) {
					if b > from.Unix() && b < from.Add(366*24*time.Hour).Unix() && !seen[b] {
						seen[b] = true
						tabled = append(tabled, b)
					}
				}
			}
			sortInts(tabled)
			if !equal(walked, tabled) {
				t.Errorf("%s %s: %d boundaries walked, %d tabled; first difference %v", tc.zone, p, len(walked),
					len(tabled), firstDiff(walked, tabled))
			}
		}
	}
}

// label names the period of a local time; an hour repeated by a change
// back is another hour (its offset differs): each hour gets its quota.
type label struct{ y, m, d, h, off int }

func labelOf(p Period, l time.Time) label {
	y, m, d := l.Date()
	switch p {
	case Hour:
		_, off := l.Zone()
		return label{y, int(m), d, l.Hour(), off}
	case Day:
		return label{y, int(m), d, 0, 0}
	case Week:
		wy, w := l.ISOWeek()
		return label{wy, w, 0, 0, 0}
	}
	return label{y, int(m), 0, 0, 0}
}

func TestZones(t *testing.T) {
	for _, bad := range []string{"", "Local", "Europe/Nowhere", "../../etc/passwd", "+01:00"} {
		if _, err := LoadZone(bad); err == nil {
			t.Errorf("LoadZone(%q) accepted", bad)
		}
	}
	if _, err := ParsePeriod("year"); err == nil {
		t.Error("ParsePeriod(year) accepted")
	}
}

func TestTableSize(t *testing.T) {
	at := time.Unix(utc("2025-10-26T00:30:00Z"), 0)
	for _, p := range Periods {
		for _, z := range []string{"UTC", "Europe/Berlin", "Pacific/Kiritimati", "Pacific/Pago_Pago"} {
			b := Table(p, zone(t, z), at)
			if len(b) > MaxEntries {
				t.Errorf("%s %s: %d entries", p, z, len(b))
			}
			if b[1] > at.Unix() || b[2] <= at.Unix() {
				t.Errorf("%s %s: the current period is not the second: %v", p, z, b[:3])
			}
			if b[len(b)-1]-at.Unix() < int64(Ahead/time.Second) {
				t.Errorf("%s %s: reaches only %v ahead", p, z, time.Duration(b[len(b)-1]-at.Unix())*time.Second)
			}
			s, err := Encode(b)
			if err != nil || len(s) != len(b)*Width {
				t.Fatalf("%s %s: %q %v", p, z, s, err)
			}
			back, err := Decode(s)
			if err != nil || !equal(back, b) {
				t.Errorf("%s %s: decode %v %v", p, z, back, err)
			}
		}
	}
	for _, bad := range [][]int64{{1_800_000_000}, {1_800_000_000, 1_800_000_000}, {999_999_999, 1_800_000_000},
		{1_800_000_001, 1_800_000_000}} {
		if _, err := Encode(bad); err == nil {
			t.Errorf("Encode(%v) accepted", bad)
		}
	}
	for _, bad := range []string{"", "1800000000", "18000000001800000000x", "0800000000180000000", " 800000000 900000000"} {
		if _, err := Decode(bad); err == nil {
			t.Errorf("Decode(%q) accepted", bad)
		}
	}
}

func TestFindAndTake(t *testing.T) {
	b := []int64{1_800_000_000, 1_800_003_600, 1_800_007_200, 1_800_010_800}
	for _, c := range []struct {
		now        int64
		start, end int64
		ok         bool
	}{
		{1_799_999_999_999_999, 0, 0, false},
		{1_800_000_000_000_000, 1_800_000_000, 1_800_003_600, true},
		{1_800_003_599_999_999, 1_800_000_000, 1_800_003_600, true},
		{1_800_003_600_000_000, 1_800_003_600, 1_800_007_200, true},
		{1_800_010_799_999_999, 1_800_007_200, 1_800_010_800, true},
		{1_800_010_800_000_000, 0, 0, false},
	} {
		s, e, ok := Find(b, c.now)
		if s != c.start || e != c.end || ok != c.ok {
			t.Errorf("Find at %d: %d %d %v, want %d %d %v", c.now, s, e, ok, c.start, c.end, c.ok)
		}
	}
	now := int64(1_800_000_000_000_000 + 600_000_000) // 10 minutes in
	used, ok, a := Take(10, 7, 3, 1_800_003_600_000_000, now, false)
	if !ok || used != 10 || a != (tokens.Answer{Code: tokens.Allowed, Remaining: 0, ResetMicros: 3_000_000_000}) {
		t.Errorf("7 + 3 of 10: %d %v %+v", used, ok, a)
	}
	used, ok, a = Take(10, 10, 1, 1_800_003_600_000_000, now, false)
	if ok || used != 10 || a != (tokens.Answer{Code: tokens.Denied, Remaining: 0, RetryMicros: 3_000_000_000,
		ResetMicros: 3_000_000_000}) {
		t.Errorf("10 + 1 of 10: %d %v %+v", used, ok, a)
	}
	if _, _, a := Take(5, 12, 1, 1_800_003_600_000_000, now, true); a.Code != tokens.WouldDeny || a.Remaining != 0 {
		t.Errorf("shadow, over a lowered quota: %+v", a)
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func firstDiff(a, b []int64) []string {
	for i := 0; i < min(len(a), len(b)); i++ {
		if a[i] != b[i] {
			return []string{time.Unix(a[i], 0).UTC().String(), time.Unix(b[i], 0).UTC().String()}
		}
	}
	return nil
}

func sortInts(a []int64) {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j] < a[j-1]; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
}
