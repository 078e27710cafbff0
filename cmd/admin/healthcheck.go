package main

import (
	"context"

	"github.com/sluicehq/sluice/internal/startup"
)

// healthcheck is `healthcheck [-url URL]`, for container health checks in
// images without curl.
func healthcheck(ctx context.Context, e env) error {
	return startup.Healthcheck(ctx, "sluice-admin", "http://127.0.0.1:8080/healthz", e.args, e.stderr)
}
