// Package client takes tokens from Sluice buckets: the library a Go
// service imports to be rate limited.
//
// A service creates one Limiter per app name with New, over a go-redis
// UniversalClient (single node, Sentinel failover client or Cluster), and
// shares it between goroutines. Acquire takes n tokens and says whether
// they were granted; Allow is Acquire of one token as a bool; Wait blocks
// until granted (queueing); Middleware and package ginlimit put a bucket in
// front of HTTP routes.
//
// # How a call works
//
// Every Acquire is one run of the acquire script in Redis (see
// docs/protocol.md): refill by Redis's own clock, check the app, take the
// tokens, all atomically. The client's clock is never used for token math.
// Concurrent calls are batched: a caller that finds a round trip free
// sends its call at once on its own goroutine; calls that arrive while the
// Limiter's two round trips are in flight queue, and when one ends, one of
// the queued callers sends them all as one pipeline. So a lone caller
// never waits for anyone, and a hundred goroutines share a few round trips
// instead of waiting for one each. Each call in a pipeline is still its
// own atomic script.
//
// # When Redis fails
//
// A call waits at most the timeout (WithTimeout, 50 ms by default). A call
// that timed out or lost its connection is never sent again (Redis may
// have run it, and the tokens would be taken twice); only NOSCRIPT, which
// means the script did not run, is answered by resending the call with the
// script's source. Calls still queued when their caller gave up are
// dropped unsent.
//
// The first such failure opens a circuit breaker: from then on calls do
// not touch the network and are answered by the FailurePolicy in well
// under a microsecond. A background probe loads the script every probe
// interval (100 ms by default; at most one probe is in flight) and closes
// the breaker at the first success, so calls return to Redis within the
// probe interval after it recovers, with the script already loaded after a
// restart. An error reply about one call alone (a key of the wrong type)
// gets the policy's answer without opening the breaker.
//
// The policies: FailOpen grants everything, FailClosed refuses with
// ErrUnavailable, and FailLocal (the default) runs an in-process token
// bucket per bucket name from the last config Redis reported for it, at
// capacity/instances and rate/instances (WithInstances). At the start of
// each outage a local bucket holds this instance's share of the tokens
// Redis last reported left, plus what refilled since, rather than a full
// bucket: the whole fleet then stays near the global limit instead of
// letting a burst through at every outage. A bucket this process never got
// an answer for is refused (ErrUnavailable): there is no safe rate to guess.
//
// go-redis's own timeouts still govern its connections. Give the client a
// ReadTimeout and WriteTimeout of a few hundred milliseconds, so that
// connections stuck on a dead server are replaced soon; the Limiter's
// timeout bounds every caller's wait either way.
package client
