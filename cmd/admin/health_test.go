package main

import (
	"net/http"
	"testing"
	"time"
)

func waitHealthy(t *testing.T, base string, done <-chan error, stderr *syncBuffer) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
			return
		}
		select {
		case err := <-done:
			t.Fatalf("server stopped: %v\n%s", err, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("server did not come up: %v\n%s", err, stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
