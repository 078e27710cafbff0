package api_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/api"
)

// checkSecurityHeaders asserts the headers every API response carries.
func checkSecurityHeaders(t testing.TB, h http.Header) {
	t.Helper()
	want := map[string]string{
		"X-Content-Type-Options": "nosniff",
		"Referrer-Policy":        "no-referrer",
		"Cache-Control":          "no-store",
		"X-Frame-Options":        "DENY",
	}
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	csp := h.Get("Content-Security-Policy")
	if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("Content-Security-Policy = %q", csp)
	}
}

type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Fields  []struct {
			Field  string `json:"field"`
			Reason string `json:"reason"`
		} `json:"fields"`
	} `json:"error"`
}

// TestWithoutStores covers what the API answers before it reaches a store:
// the public document, unknown routes and methods, missing credentials.
func TestWithoutStores(t *testing.T) {
	t.Parallel()
	h := api.New(api.Config{})
	tests := []struct {
		name, method, path string
		header             map[string]string
		status             int
		code               string
	}{
		{"unknown path", "GET", "/api/v1/nope", nil, 404, "not_found"},
		{"unknown nested path", "GET", "/api/v1/buckets/a/b/c", nil, 404, "not_found"},
		{"unclean path", "GET", "/api/v1//buckets", nil, 404, "not_found"},
		{"outside the prefix", "GET", "/elsewhere", nil, 404, "not_found"},
		{"wrong method", "DELETE", "/api/v1/apps", nil, 405, "method_not_allowed"},
		{"anonymous", "GET", "/api/v1/buckets", nil, 401, "unauthenticated"},
		{"anonymous write", "POST", "/api/v1/buckets", nil, 401, "unauthenticated"},
		{"basic auth", "GET", "/api/v1/buckets", map[string]string{"Authorization": "Basic YWxpY2U6cHc="}, 401, "unauthenticated"},
		{"empty bearer", "GET", "/api/v1/buckets", map[string]string{"Authorization": "Bearer "}, 401, "unauthenticated"},
		{"bearer without space", "GET", "/api/v1/buckets", map[string]string{"Authorization": "Bearerxyz"}, 401, "unauthenticated"},
		{"huge token", "GET", "/api/v1/buckets", map[string]string{"Authorization": "Bearer " + strings.Repeat("a", 5000)}, 401, "unauthenticated"},
		{"cookie is not a credential", "GET", "/api/v1/me", map[string]string{"Cookie": "sluice_session=abc"}, 401, "unauthenticated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(tt.method, tt.path, nil)
			for k, v := range tt.header {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tt.status {
				t.Fatalf("status = %d, want %d; body %s", w.Code, tt.status, w.Body)
			}
			checkSecurityHeaders(t, w.Header())
			if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type = %q", ct)
			}
			var body errorBody
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatalf("error body is not JSON: %v: %s", err, w.Body)
			}
			if body.Error.Code != tt.code || body.Error.Message == "" {
				t.Errorf("error = %+v, want code %q and a message", body.Error, tt.code)
			}
			if tt.status == 401 && !strings.HasPrefix(w.Header().Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("WWW-Authenticate = %q", w.Header().Get("WWW-Authenticate"))
			}
			if tt.status == 405 && !strings.Contains(w.Header().Get("Allow"), "GET") {
				t.Errorf("Allow = %q", w.Header().Get("Allow"))
			}
		})
	}
}

func TestOpenAPIServed(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(api.New(api.Config{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/api/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	checkSecurityHeaders(t, resp.Header)
	want, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(body, want) || !json.Valid(body) {
		t.Fatal("served document differs from openapi.json or is not JSON")
	}
}
