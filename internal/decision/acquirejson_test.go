package decision

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"unicode/utf8"
)

var acquireBodies = []string{
	`{"bucket":"checkout"}`,
	` {"bucket": "checkout", "n": 3, "key": "10.0.0.1", "critical": true} `,
	"{\n\t\"bucket\":\"a\",\r\n\"n\":-0}",
	`{}`,
	`{"n":9223372036854775807}`,
	`{"n":9223372036854775808}`,
	`{"n":-9223372036854775808}`,
	`{"n":1.0}`,
	`{"n":1e3}`,
	`{"n":01}`,
	`{"n":-}`,
	`{"n":"1"}`,
	`{"n":null}`,
	`{"bucket":"a","bucket":"b"}`,
	`{"Bucket":"a"}`,
	`{"bucket":"a\"b"}`,
	`{"bucket":"\u00e9"}`,
	`{"bucket":"é"}`,
	"{\"bucket\":\"a\tb\"}",
	`{"bucket":"a",}`,
	`{"bucket":"a"} {}`,
	`{"bucket":"a"}}`,
	`{"critical":truex}`,
	`{"critical":false,"critical":true}`,
	`{"critical":1}`,
	`{"other":1}`,
	`[]`,
	``,
	`{"bucket":`,
	`{"bucket" "a"}`,
	`{,}`,
}

// The fast path takes only bodies encoding/json reads to the same request.
func TestAcquireJSONAgreesWithEncodingJSON(t *testing.T) {
	taken := 0
	for _, body := range acquireBodies {
		if agreeOnAcquire(t, []byte(body)) {
			taken++
		}
	}
	if taken < 8 {
		t.Fatalf("the fast path took %d of the bodies; it should take the plain ones", taken)
	}
}

func FuzzParseAcquire(f *testing.F) {
	for _, body := range acquireBodies {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if utf8.Valid(body) { // readBody refuses the rest first
			agreeOnAcquire(t, body)
		}
	})
}

// agreeOnAcquire reports whether the fast path took body, failing t if it
// took a body that encoding/json refuses or reads otherwise.
func agreeOnAcquire(t *testing.T, body []byte) bool {
	t.Helper()
	var fast, slow AcquireRequest
	if !parseAcquire(body, &fast) {
		return false
	}
	if err := decodeJSON(body, &slow, "{}"); err != nil {
		t.Fatalf("%q: the fast path took it, encoding/json refuses it: %v", body, err)
	}
	if fast != slow {
		t.Fatalf("%q: fast path %+v, encoding/json %+v", body, fast, slow)
	}
	return true
}

func TestAcquireResponseJSONIsEncodingJSONs(t *testing.T) {
	for _, r := range []AcquireResponse{
		{},
		{Allowed: true, Remaining: 41, Limit: 100, RetryAfter: 0, ResetAfter: 0.59},
		{Remaining: -3, Limit: math.MaxInt64, RetryAfter: 0.000001, ResetAfter: 86400.5, WouldDeny: true},
		{Allowed: true, Remaining: math.MinInt64, RetryAfter: 9223372036.854775, ResetAfter: 1e-6, Fallback: true},
		{RetryAfter: seconds(123456789), ResetAfter: seconds(1<<62 + 12345)},
	} {
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(r); err != nil {
			t.Fatal(err)
		}
		if got := r.appendJSON(nil); string(got) != want.String() {
			t.Errorf("%+v: %s, encoding/json %s", r, got, want.String())
		}
	}
}
