// Command sluice-sync keeps the bucket hashes in Redis equal to the bucket
// definitions in MySQL: it applies change events as they are committed and
// reconciles everything periodically. Several instances may run at once.
//
// Configuration comes from flags and SLUICE_* environment variables (run
// with -h). It serves /healthz, /readyz and /metrics on SLUICE_HTTP_ADDR
// (default :9090) and stops gracefully on SIGTERM or SIGINT.
//
// Exit codes: 0 after a requested stop, 1 when a store cannot be reached at
// start-up or the worker fails, 2 on bad configuration.
package main

import "github.com/sluicehq/sluice/internal/startup"

func main() { startup.Main("sluice-sync", worker.Run) }
