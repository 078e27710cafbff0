// Command sluice-decide is the decision service: Envoy's rate limit
// service API (envoy.service.ratelimit.v3.RateLimitService over gRPC) and
// an HTTP endpoint (/v1/acquire, also in a form for nginx auth_request),
// for gateways and for services in any language. It is stateless: run as
// many copies as needed behind a load balancer.
//
// Configuration comes from flags and SLUICE_* environment variables (run
// with -h). The HTTP listener also serves /healthz, /readyz and /metrics.
// It stops gracefully on SIGTERM or SIGINT.
//
// Exit codes: 0 after a requested stop, 1 when a store cannot be reached at
// start-up or a listener fails, 2 on bad configuration.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv)
	stop()
	os.Exit(exitCode(err))
}

// exitCode reports err on stderr and maps it to the process exit code.
func exitCode(err error) int {
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(os.Stderr, "sluice-decide: %v\nRun sluice-decide -h for the flags and environment variables.\n", err)
		return 2
	default:
		fmt.Fprintf(os.Stderr, "sluice-decide: %v\n", err)
		return 1
	}
}
