// Command sluice-admin serves the Sluice web console and administers the
// database from the command line.
//
//	sluice-admin [serve] [flags]       serve the console (the default)
//	sluice-admin -dev                  the whole product in one process, in memory
//	sluice-admin migrate up|down|version
//	sluice-admin create-user -username NAME -password-stdin [-admin]
//	sluice-admin set-password -username NAME -password-stdin
//	sluice-admin healthcheck -url URL
//
// Configuration comes from flags and SLUICE_* environment variables (run a
// subcommand with -h). Exit codes: 0 on success or a requested stop, 1 on a
// failure, 2 on bad usage or configuration.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/sluicehq/sluice/internal/settings"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv)
	stop()
	os.Exit(exitCode(err))
}

// exitCode reports err on stderr and maps it to the process exit code.
func exitCode(err error) int { return settings.ExitCode("sluice-admin", err, os.Stderr) }
