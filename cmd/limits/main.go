// Command sluice-limits keeps Sluice's limits as code: it exports the apps,
// buckets (with their overrides) and descriptor mappings a token can see as
// a YAML file, shows what applying a file would change, applies it through
// the console's JSON API, and converts envoyproxy/ratelimit configuration
// into such a file.
//
//	sluice-limits export [-o FILE] [-app NAME,...] [-no-versions]
//	sluice-limits diff -f FILE [-prune] [-exit-code]
//	sluice-limits apply -f FILE [-prune]
//	sluice-limits import-envoy -f CONFIG.yaml [-app NAME] [-o FILE] [-strict]
//
// The server and token come from -server / SLUICE_SERVER and -token /
// SLUICE_TOKEN (a personal API token made on the console's tokens page).
//
// Exit codes: 0 success (diff: no changes, or changes without -exit-code);
// 1 an error (the file is invalid, the API refused, a conflict); 2 a usage
// mistake; 3 diff -exit-code found changes; 4 apply or diff found a
// conflict (an object changed since the file's version) and changed nothing.
package main

import "os"

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
}
