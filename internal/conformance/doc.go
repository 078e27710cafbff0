// Package conformance holds only tests: they run the contract's scripts
// (internal/redisscript) and the client against both Redis engines Sluice
// serves, the real redis-server and the in-process miniredis of `-dev`,
// and require the same answers from both; docs/conformance.json is run
// here too, through the raw scripts, client.Limiter and client/memlimit
// (docs/protocol.md, "Conformance table").
//
// They live in the root module, which already requires miniredis for the
// embedded run, rather than next to the code they check: a test import in
// the client's or the contract's module would be listed in the module
// graph of every service that requires the client (docs/decisions.md,
// "The client's module graph"). The contract's own unit tests stay in
// internal/redisscript.
package conformance
