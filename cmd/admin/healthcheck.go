package main

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// healthcheck is `healthcheck -url URL`, for container health checks in
// images without curl.
func healthcheck(ctx context.Context, e env) error {
	url, timeout := "http://127.0.0.1:8080/healthz", 3*time.Second
	s := newSettings(e, "healthcheck", "healthcheck [-url URL]")
	s.String(&url, "url", "", "URL to check")
	s.Duration(&timeout, "timeout", "", "give up after this long")
	if err := s.Parse(e.args); err != nil {
		return err
	}
	if err := s.NoArgs(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return usagef("-url %q: %w", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("health check: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("health check: %s answered %s", url, resp.Status)
	}
	return nil
}
