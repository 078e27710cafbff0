package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestDevListensOnLoopback: -dev, which seeds an admin, listens on
// loopback unless an address is given by flag or environment.
func TestDevListensOnLoopback(t *testing.T) {
	for _, tt := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"dev", nil, []string{"-dev"}, "127.0.0.1:8080"},
		{"dev with -listen", nil, []string{"-dev", "-listen", ":9000"}, ":9000"},
		{"dev with SLUICE_LISTEN", map[string]string{"SLUICE_LISTEN": "0.0.0.0:8081"}, []string{"-dev"}, "0.0.0.0:8081"},
		{"serve", nil, []string{"-mysql-dsn", "u@tcp(db:3306)/s", "-redis-addr", "r:6379"}, ":8080"},
	} {
		getenv := func(k string) string { return tt.env[k] }
		cfg, err := parseServe(env{getenv: getenv, stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard, args: tt.args})
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if cfg.listen != tt.want {
			t.Errorf("%s: listens on %q, want %q", tt.name, cfg.listen, tt.want)
		}
	}
}

// TestHSTS: a deployment marked secure sends Strict-Transport-Security on
// every response, refusals included; a plain one does not.
func TestHSTS(t *testing.T) {
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/missing" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	for _, secure := range []bool{true, false} {
		h := withHSTS(inner, secure)
		for _, path := range []string{"/login", "/missing"} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
			got := rec.Header().Get("Strict-Transport-Security")
			if secure && got != "max-age=31536000" || !secure && got != "" {
				t.Errorf("secure=%v %s: Strict-Transport-Security %q", secure, path, got)
			}
		}
	}
}
