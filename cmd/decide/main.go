// Command sluice-decide is the decision service: Envoy's rate limit
// service API (envoy.service.ratelimit.v3.RateLimitService over gRPC) and
// an HTTP endpoint (/v1/acquire, also in a form for nginx auth_request),
// for gateways and for services in any language. It is stateless: run as
// many copies as needed behind a load balancer.
//
// Configuration comes from flags and SLUICE_* environment variables (run
// with -h). The HTTP listener also serves /healthz and /readyz; Prometheus
// /metrics has a listener of its own (-metrics-addr), off by default.
// It stops gracefully on SIGTERM or SIGINT.
//
// Exit codes: 0 after a requested stop, 1 when a store cannot be reached at
// start-up or a listener fails, 2 on bad configuration.
package main

import "github.com/sluicehq/sluice/internal/startup"

func main() { startup.Main("sluice-decide", worker.Run) }
