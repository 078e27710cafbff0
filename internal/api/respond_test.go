package api

import (
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/manage"
	"github.com/sluicehq/sluice/internal/router"
)

func statusOf(err error) int {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.status
	}
	return 0
}

func TestDecode(t *testing.T) {
	type body struct {
		Name  string `json:"name"`
		Count *int64 `json:"count"`
	}
	tests := []struct {
		name, contentType, body string
		status                  int    // 0: decodes
		inMessage               string // part of the message
	}{
		{"ok", "application/json", `{"name":"a","count":3}`, 0, ""},
		{"no content type", "", `{"name":"a"}`, 0, ""},
		{"charset", "application/json; charset=utf-8", `{"name":"a"}`, 0, ""},
		{"merge patch", "application/merge-patch+json", `{"name":"a"}`, 0, ""},
		{"trailing space", "application/json", "{\"name\":\"a\"}\n  ", 0, ""},
		{"form", "application/x-www-form-urlencoded", `name=a`, http.StatusUnsupportedMediaType, "JSON"},
		{"bad media type", "a/b/c;;", `{}`, http.StatusUnsupportedMediaType, "JSON"},
		{"empty", "application/json", ``, http.StatusBadRequest, "body is required"},
		{"unknown field", "application/json", `{"name":"a","version":3}`, http.StatusBadRequest, `unknown field "version"`},
		{"syntax", "application/json", `{"name":"a",}`, http.StatusBadRequest, "malformed JSON at byte"},
		{"truncated", "application/json", `{"name":"a"`, http.StatusBadRequest, "ends too early"},
		{"wrong type", "application/json", `{"count":"3"}`, http.StatusBadRequest, "count must be a whole number"},
		{"fraction", "application/json", `{"count":1.5}`, http.StatusBadRequest, "count must be a whole number"},
		{"overflow", "application/json", `{"count":1e30}`, http.StatusBadRequest, "count must be a whole number"},
		{"array", "application/json", `[1,2]`, http.StatusBadRequest, "must be a JSON object"},
		{"two objects", "application/json", `{"name":"a"}{"name":"b"}`, http.StatusBadRequest, "exactly one JSON object"},
		{"too large", "application/json", `{"name":"` + strings.Repeat("x", router.MaxBodyBytes) + `"}`, http.StatusRequestEntityTooLarge, "at most"},
		{"too large after object", "application/json", `{"name":"a"}` + strings.Repeat(" ", router.MaxBodyBytes), http.StatusRequestEntityTooLarge, "at most"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tt.body))
			if tt.contentType != "" {
				r.Header.Set("Content-Type", tt.contentType)
			}
			r.Body = http.MaxBytesReader(httptest.NewRecorder(), r.Body, router.MaxBodyBytes)
			var b body
			err := decode(r, &b)
			if tt.status == 0 {
				if err != nil {
					t.Fatalf("decode: %v", err)
				}
				if b.Name != "a" {
					t.Fatalf("decoded %+v", b)
				}
				return
			}
			if got := statusOf(err); got != tt.status {
				t.Fatalf("status = %d (%v), want %d", got, err, tt.status)
			}
			if !strings.Contains(err.Error(), tt.inMessage) {
				t.Fatalf("message %q does not contain %q", err.Error(), tt.inMessage)
			}
		})
	}
}

func TestIfMatch(t *testing.T) {
	tests := []struct {
		header  []string
		version int64
		status  int
	}{
		{nil, 0, http.StatusPreconditionRequired},
		{[]string{`"3"`}, 3, 0},
		{[]string{` "12" `}, 12, 0},
		{[]string{`*`}, 0, 0},
		{[]string{`"3", "4"`}, 0, http.StatusBadRequest},
		{[]string{`"3"`, `"4"`}, 0, http.StatusBadRequest},
		{[]string{`W/"3"`}, 0, http.StatusBadRequest},
		{[]string{`3`}, 0, http.StatusBadRequest},
		{[]string{`""`}, 0, http.StatusBadRequest},
		{[]string{`"abc"`}, 0, http.StatusPreconditionFailed},
		{[]string{`"0"`}, 0, http.StatusPreconditionFailed},
		{[]string{`"-1"`}, 0, http.StatusPreconditionFailed},
		{[]string{`"99999999999999999999"`}, 0, http.StatusPreconditionFailed},
	}
	for _, tt := range tests {
		r := httptest.NewRequest(http.MethodPut, "/", nil)
		for _, h := range tt.header {
			r.Header.Add("If-Match", h)
		}
		v, err := ifMatch(r)
		if got := statusOf(err); got != tt.status || v != tt.version {
			t.Errorf("If-Match %q: version %d, status %d (%v); want %d, %d", tt.header, v, got, err, tt.version, tt.status)
		}
	}
}

func TestPageParams(t *testing.T) {
	next := nextCursor("bucket", "b-17")
	if next == "" || strings.Contains(next, "b-17") {
		t.Fatalf("cursor %q should be opaque", next)
	}
	if nextCursor("bucket", "") != "" {
		t.Fatal("the last page must have no cursor")
	}
	tests := []struct {
		query  string
		cursor string
		limit  int
		status int
	}{
		{"", "", defaultLimit, 0},
		{"limit=1", "", 1, 0},
		{"limit=500&cursor=" + next, "b-17", 500, 0},
		{"limit=0", "", 0, http.StatusBadRequest},
		{"limit=501", "", 0, http.StatusBadRequest},
		{"limit=-1", "", 0, http.StatusBadRequest},
		{"limit=ten", "", 0, http.StatusBadRequest},
		{"cursor=" + nextCursor("app", "b-17"), "", 0, http.StatusBadRequest}, // another list's cursor
		{"cursor=%25%25", "", 0, http.StatusBadRequest},
		{"cursor=!!", "", 0, http.StatusBadRequest},
	}
	for _, tt := range tests {
		r := httptest.NewRequest(http.MethodGet, "/?"+tt.query, nil)
		cursor, limit, err := page(r, "bucket")
		if got := statusOf(err); got != tt.status || cursor != tt.cursor || limit != tt.limit {
			t.Errorf("?%s: cursor %q limit %d status %d; want %q %d %d", tt.query, cursor, limit, got, tt.cursor, tt.limit, tt.status)
		}
	}
}

func TestRateText(t *testing.T) {
	for _, tt := range []struct {
		micro, period int64
		want          string
	}{
		{500_000, 1, "0.5/s"},
		{100_000_000, 60, "100/min"},
		{7_000_000, 90, "7/90s"},
		{10_000_000_000, 86400, "10000/day"},
	} {
		if got := rateText(tt.micro, tt.period); got != tt.want {
			t.Errorf("rateText(%d, %d) = %q, want %q", tt.micro, tt.period, got, tt.want)
		}
	}
}

// TestPanicIsA500 checks that a handler bug costs one request a generic
// JSON 500, not the process or a stack trace in the response.
func TestPanicIsA500(t *testing.T) {
	s := &server{log: slog.New(slog.DiscardHandler)}
	rt, err := router.New(router.Config{Logger: s.log})
	if err != nil {
		t.Fatal(err)
	}
	s.area(rt, Prefix).GET("/panic", s.serve(route{public: true, handle: func(http.ResponseWriter, *http.Request, manage.Caller) error {
		panic("secret detail")
	}}))
	w := httptest.NewRecorder()
	rt.ServeHTTP(w, httptest.NewRequest(http.MethodGet, Prefix+"/panic", nil))
	if w.Code != http.StatusInternalServerError || !strings.Contains(w.Body.String(), `"code":"internal"`) ||
		strings.Contains(w.Body.String(), "secret") {
		t.Fatalf("status %d body %s", w.Code, w.Body)
	}
}
