package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/router"
)

// FuzzBucketBody feeds arbitrary bodies through what a bucket write does
// before the store: strict decoding, applying and validating. Every input
// must end in a decoded bucket, a 4xx apiError or a field validation,
// never a panic, and a bucket that validates must survive a JSON round trip.
func FuzzBucketBody(f *testing.F) {
	for _, seed := range []string{
		`{"name":"a","owner_app":"b","max_permits":1,"rate":"1/s"}`,
		`{"name":"a","owner_app":"b","max_permits":1000000000,"rate":"0.000001 per 365 days","allowed_apps":["b","c"]}`,
		`{"rate":"1e3/s"}`, `{"rate":"١/s"}`, `{"max_permits":-0}`, `{"allowed_apps":[null]}`,
		`{"description":"\u0000"}`, `{"name":null}`, `{}`, `[]`, `null`, `{"name":"a"}{`, "\xff",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		r.Body = http.MaxBytesReader(httptest.NewRecorder(), r.Body, router.MaxBodyBytes)
		var in bucketInput
		if err := decode(r, &in); err != nil {
			var ae *apiError
			if !asAPIError(err, &ae) || ae.status < 400 || ae.status > 499 || ae.message == "" {
				t.Fatalf("decode error %v is not a 4xx apiError", err)
			}
			return
		}
		b := &buckets.Bucket{}
		p := in.patch()
		err := p.Apply(b)
		if err != nil {
			v := errs.Fields(err)
			if v == nil || len(v.Fields) == 0 {
				t.Fatalf("validation error %v carries no field", err)
			}
			return
		}
		out, err := json.Marshal(toBucketJSON(b))
		if err != nil {
			t.Fatalf("marshal %+v: %v", b, err)
		}
		var back struct {
			Rate string `json:"rate"`
		}
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatal(err)
		}
		if parsed, err := buckets.ParseRate(back.Rate); err != nil || parsed != b.Rate {
			t.Fatalf("rate %q does not round-trip: %v", back.Rate, err)
		}
	})
}

// FuzzRequestParams: If-Match and the paging parameters never panic and
// fail only as 4xx.
func FuzzRequestParams(f *testing.F) {
	f.Add(`"3"`, "limit=2&cursor="+nextCursor("bucket", "a"))
	f.Add(`*`, "cursor=%zz")
	f.Add(`W/"1", "2"`, "limit=99999999999999999999")
	f.Fuzz(func(t *testing.T, ifMatchValue, rawQuery string) {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.URL.RawQuery = rawQuery
		if _, err := url.ParseQuery(rawQuery); err != nil {
			r.URL.RawQuery = url.QueryEscape(rawQuery)
		}
		r.Header.Set("If-Match", ifMatchValue)
		for _, err := range []error{
			func() error { _, err := ifMatch(r); return err }(),
			func() error { _, _, err := page(r, "bucket"); return err }(),
		} {
			if err == nil {
				continue
			}
			var ae *apiError
			if !asAPIError(err, &ae) || ae.status < 400 || ae.status > 499 {
				t.Fatalf("error %v is not a 4xx apiError", err)
			}
		}
	})
}

func asAPIError(err error, target **apiError) bool {
	ae, ok := err.(*apiError)
	if ok {
		*target = ae
	}
	return ok
}
