// Package client takes tokens from Sluice buckets: the library a Go
// service imports to be rate limited.
//
// A service creates one Limiter per app name with New, over a go-redis
// UniversalClient (single node, Sentinel failover client or Cluster), and
// shares it between goroutines. Acquire takes n tokens and says whether
// they were granted; Allow is Acquire of one token as a bool; Wait blocks
// until granted (queueing); Middleware and package ginlimit put a bucket in
// front of HTTP routes. AcquireAll takes from several buckets atomically
// (every one or none), plain buckets and keys of keyed buckets alike; Refund and Charge give tokens back or take them
// after the fact (a bucket may go into debt, at most its capacity);
// Reserve takes tokens ahead, to act on after a delay or cancel.
//
// Middleware and Wait take an Acquirer, which *Limiter implements, and so
// does package memlimit's in-memory limiter with a clock tests control:
// code that is rate limited can be unit tested without Redis.
//
// # Keyed buckets
//
// A keyed bucket keeps its tokens per key: AcquireKey, AllowKey and
// WaitKey take the key (a user id, an API key, a client address; 1 to 256
// bytes of anything) besides the bucket, and KeyMiddleware (and
// ginlimit.KeyMiddleware) take a function from request to key, such as
// ClientIP, which honours X-Forwarded-For only from trusted proxies, or
// HeaderKey. Each key gets the bucket's limit or its most specific
// override's (exact key, else longest prefix), decided in Redis at every
// call. Results, errors and failure policies are those of plain buckets;
// FailLocal keeps a bounded table of recent keys (10,000), recording the
// limit of keys Redis answered with an override's.
//
// # Concurrency limits
//
// A limit of kind concurrency allows at most its limit of calls in
// progress at once. TakeSlot (TakeSlotKey for a keyed one) takes a slot
// and returns a *Slot: Release it when the work ends, Renew it (or
// KeepAlive) while long work lasts; a slot neither released nor renewed
// expires after the limit's slot lease time, so a process that dies gives
// its slots back by itself. ConcurrencyMiddleware and
// KeyConcurrencyMiddleware hold a slot for the length of a request.
// Failure policies answer takes too (see FailurePolicy for what each
// allows in slots).
// # Critical requests and reserves
//
// A bucket may keep a reserve: tokens that only requests marked critical
// may take. Mark them in their context with Critical (CriticalWhen, and
// ginlimit.CriticalWhen, do it for HTTP routes): Acquire, AcquireKey,
// AcquireAll (the whole set), Allow, Wait and the middleware all read it.
// Any other request is refused when taking its tokens would leave less than
// the reserve, and its Result counts what it could take (Remaining above
// the reserve, RetryAfter until the reserve and its n are there); n above
// capacity - reserve is ErrExceedsCapacity for it. A keyed bucket's
// overrides keep the bucket's share of their capacity. Leases never hold
// reserved tokens: a critical call that finds its lease dry asks Redis.
// While the policy answers, FailLocal's local bucket keeps its share of
// the reserve for critical requests, FailOpen grants everyone and
// FailClosed no one (docs/protocol.md, "Failure policies").
//
// # How a call works
//
// Every Acquire is one run of the acquire script in Redis (see
// docs/protocol.md): refill by Redis's own clock, check the app, take the
// tokens, all atomically. The client's clock is never used for token math.
//
// On Redis 7 and later the token calls run as Redis functions: over a
// single-node or Sentinel client, New loads the function library of the
// token scripts in the background (FUNCTION LOAD, once per Limiter, never
// blocking or failing New), and from then on an Acquire (and a keyed
// acquire, AcquireAll, a refund or charge, a lease, a slot call) is an
// FCALL, which answers exactly as the script does and costs Redis less
// (the script's chunk is not run again on every call). Until the library
// is loaded, and for good where it cannot be (an older Redis, an ACL user
// without FUNCTION, Cluster and Ring clients), they run as EVALSHA. A
// Redis that lost the library (restarted without persistence, FUNCTION
// FLUSH) answers "Function not found": the call is resent with the
// script's source, as after NOSCRIPT, and the library is loaded again in
// the background. Each library's name carries a hash of its source, so
// clients of different versions share a server without replacing each
// other's; FUNCTION DELETE removes the library of a version no longer
// run.
// Concurrent calls are batched only when they must wait anyway: a caller
// that finds a connection of the Redis client's pool free sends its call
// at once on its own goroutine; calls that arrive while every connection
// carries a round trip queue, and when one ends, one of the queued callers
// sends them all as one pipeline. So no caller waits while a connection
// could carry its call, and a hundred goroutines share the pool's round
// trips instead of waiting for a connection each. Where fewer round trips
// in flight answer more calls a second (the cores or Redis are saturated),
// which the Limiter tries now and then, fewer are let in flight and more
// calls go together. Slot, AcquireAll and adjustment calls share the same
// round trips.
//
// After Redis denies a bucket or key, calls it certainly denies too (the
// level the denial implies, plus the refill since, less what this Limiter
// took or is asking for since, is below what they ask) are answered
// in-process with the Result Redis would give, for at most a second after
// the denial (WithDenialCache): a refund from another process, a raised
// limit or shadow mode turned on can meanwhile meet a stale denial. The
// cache only denies; it never admits. Each call in a pipeline is still its
// own atomic script.
//
// # When Redis fails
//
// A call waits at most the timeout (WithTimeout, 50 ms by default). A call
// that timed out or lost its connection is never sent again (Redis may
// have run it, and the tokens would be taken twice); only NOSCRIPT (or
// "Function not found" for an FCALL), which means the script did not run,
// is answered by resending the call with the script's source. Calls still
// queued when their caller gave up are dropped unsent.
//
// Such a failure gets the FailurePolicy's answer. Failures that keep
// coming open a circuit breaker: 3 calls in a row (no answer between them)
// over at least 100 ms (WithBreaker), confirmed by a probe with a timeout
// of its own that gets no answer either. A process stalled by a loaded
// machine sees all its calls in flight time out at one instant, a streak
// with no length in time, and its probe finds Redis healthy: it does not
// open the breaker. Once open, calls do not touch the network and are
// answered by the policy in well under a microsecond. A background probe
// loads the script every probe interval (100 ms by default; one probe at
// a time; the half-open trial) and closes the breaker at the first
// success, so calls return to Redis within the probe interval after it
// recovers, with the script already loaded after a restart. An error
// reply about one call alone (a key of the wrong type) gets the policy's
// answer and counts as an answer of Redis. Limiter.Stats counts the
// breaker's openings and the time in fallback.
//
// The policies, and the most each admits beyond capacity + rate x T over
// any span T, across any number of outages (its allowance; F is the time
// the policy answered: from the first failed call to Redis's next answer):
// FailClosed refuses with ErrUnavailable (0); FailOpen grants everything
// (unbounded); FailLocal (the default) runs an in-process token bucket per
// bucket name from the last config Redis reported for it, at
// capacity/instances and rate/instances (WithInstances), which starts
// empty, fills only during F and keeps its level from one outage to the
// next (rate/instances x F per instance). It never grants the tokens Redis
// last reported: Redis grants those once it answers again. A bucket this
// process never got an answer for is refused (ErrUnavailable): there is no
// safe rate to guess.
//
// A Redis restarted without persistence answers "unknown bucket" until
// the sync worker restores the buckets. For a bucket this Limiter saw
// within the last minute and that left no tombstone (it was not deleted),
// that is a loss of state: the policy answers, for at most a minute
// (WithStateLossGrace), and the middleware never answers 500 for it.
//
// A bucket that does not exist, or that the app may not use, refuses every
// call: a deployment mistake. It is logged at error level at most once a
// minute per bucket and per kind of mistake (many unknown names give one
// line a minute), and every call is counted by the observer (see package
// clientmetrics).
//
// go-redis's own timeouts still govern its connections. Give the client a
// ReadTimeout and WriteTimeout of a few hundred milliseconds, so that
// connections stuck on a dead server are replaced soon; the Limiter's
// timeout bounds every caller's wait either way.
package client
