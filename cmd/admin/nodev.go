//go:build !dev

package main

import (
	"context"
	"log/slog"
)

// serveDev refuses -dev: production builds leave the embedded stores out,
// as the in-memory MySQL engine and Redis would more than double the
// binary for a mode no deployment uses.
func serveDev(context.Context, serveConfig, env, *slog.Logger) error {
	return usagef("-dev needs the embedded stores, which this binary was built without; from the repository, run: %s", devCommand)
}
