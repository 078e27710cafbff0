//go:build dev

package main

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

// TestMetricsListener runs the console with -metrics-addr: the metrics are
// served on that listener only, and they move as the console is used.
func TestMetricsListener(t *testing.T) {
	port, mport := testenv.FreePort(t), testenv.FreePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- dispatch(ctx, env{getenv: noEnv, stdin: strings.NewReader(""), stdout: io.Discard, stderr: stderr,
			args: []string{"-dev", "-listen", "127.0.0.1:" + strconv.Itoa(port),
				"-metrics-addr", "127.0.0.1:" + strconv.Itoa(mport), "-log-level", "warn"}})
	}()
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	metricsURL := "http://127.0.0.1:" + strconv.Itoa(mport) + "/metrics"
	waitHealthy(t, base, done, stderr)
	if !strings.Contains(stderr.String(), "Prometheus metrics on http://127.0.0.1:"+strconv.Itoa(mport)+"/metrics") {
		t.Errorf("the banner does not say where the metrics are:\n%s", stderr.String())
	}
	password := regexp.MustCompile(`with password "([^"]+)"`).FindStringSubmatch(stderr.String())
	if password == nil {
		t.Fatalf("no admin password in the banner:\n%s", stderr.String())
	}

	get := func(u string) (int, string) {
		t.Helper()
		resp, err := http.Get(u)
		if err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	code, body := get(metricsURL)
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	for _, want := range []string{`sluice_console_signins_total{result="success"} 0`, "go_goroutines", "process_cpu_seconds_total"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	// The console's own address does not expose them.
	if code, _ := get(base + "/metrics"); code != http.StatusNotFound {
		t.Errorf("the console serves /metrics with %d, want 404", code)
	}

	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	resp, err := browser.PostForm(base+"/login", url.Values{"username": {"admin"}, "password": {password[1]}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, p := range []string{"/buckets/demo-api", "/buckets/demo-api"} {
		resp, err := browser.Get(base + p)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %v %v", p, resp, err)
		}
		resp.Body.Close()
	}
	wants := []string{
		`sluice_console_signins_total{result="success"} 1`,
		`sluice_console_http_requests_total{code="200",method="GET",route="/buckets/:bucket"} 2`,
		`sluice_console_http_requests_total{code="404",method="GET",route="unmatched"} 1`,
		`sluice_console_http_request_duration_seconds_count{method="GET",route="/buckets/:bucket"} 2`,
	}
	// A request is counted as its handler returns, which may be just after
	// the client has read the response.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, body = get(metricsURL)
		missing := ""
		for _, w := range wants {
			if !strings.Contains(body, w) {
				missing = w
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics lacks %q:\n%s", missing, grepLines(body, "sluice_console_"))
		}
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve returned %v after a requested stop", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not stop")
	}
}

// grepLines keeps the lines of s that contain part.
func grepLines(s, part string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, part) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
