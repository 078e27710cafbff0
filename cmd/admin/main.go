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

import "github.com/sluicehq/sluice/internal/startup"

func main() { startup.Main("sluice-admin", run) }
