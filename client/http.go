package client

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"
)

// SetHeaders writes the RateLimit-Limit, RateLimit-Remaining and
// RateLimit-Reset headers of r (the reset in whole seconds until the bucket
// is full), and Retry-After in whole seconds (at least 1) when r is a
// denial. It writes nothing when the limit is unknown (fail open).
func SetHeaders(h http.Header, r Result) {
	limit, remaining, reset, retryAfter := HeaderValues(r)
	if limit != "" {
		h.Set("RateLimit-Limit", limit)
		h.Set("RateLimit-Remaining", remaining)
		h.Set("RateLimit-Reset", reset)
	}
	if retryAfter != "" {
		h.Set("Retry-After", retryAfter)
	}
}

// HeaderValues returns the values SetHeaders writes for r, for a server
// that spells its headers itself: limit, remaining and reset are empty when
// the limit is unknown, retryAfter unless r is a denial.
func HeaderValues(r Result) (limit, remaining, reset, retryAfter string) {
	if r.Limit > 0 {
		limit = strconv.FormatInt(r.Limit, 10)
		remaining = strconv.FormatInt(max(r.Remaining, 0), 10)
		reset = strconv.FormatInt(ceilSeconds(r.ResetAfter), 10)
	}
	if !r.Allowed && r.RetryAfter > 0 {
		retryAfter = strconv.FormatInt(max(ceilSeconds(r.RetryAfter), 1), 10)
	}
	return limit, remaining, reset, retryAfter
}

func ceilSeconds(d time.Duration) int64 {
	return int64((d + time.Second - 1) / time.Second)
}

// Status returns the HTTP status a middleware answers for an Acquire
// outcome: 0 to let the request through, 429 when denied, 503 when Redis
// is unavailable and the policy refuses, 500 when the bucket cannot serve
// this app at all (unknown bucket, app not allowed: a deployment mistake
// that should be loud; the Limiter logs it once a minute per bucket). A
// bucket that Redis lost (it restarted empty) is not unknown: the failure
// policy answers it until the sync worker restores it (WithStateLossGrace),
// so it gets 200, 429 or 503, never 500.
func Status(r Result, err error) int {
	switch {
	case err == nil && r.Allowed:
		return 0
	case err == nil:
		return http.StatusTooManyRequests
	case errors.Is(err, ErrUnavailable):
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}

// Middleware limits requests: each takes one token, as l's app, from the
// bucket bucketFor names (per route, say); an empty name lets the request
// through unlimited. Every limited response carries the RateLimit headers;
// a denial is answered 429 with Retry-After, a refusal by the failure
// policy 503, and a bucket that cannot serve the app 500 (see Status). A request whose
// client went away is dropped. The app is l's: to take tokens as another
// app on some routes, wrap those routes with a Limiter of that app.
func Middleware(l Acquirer, bucketFor func(*http.Request) string) func(http.Handler) http.Handler {
	return limit(bucketFor, func(ctx context.Context, name string) (Result, error) {
		return l.Acquire(ctx, name, 1)
	}, nil)
}

// limit is the middleware of Middleware and KeyMiddleware: keyFor names
// what a request takes its token from ("" lets it through unlimited) and
// acquire takes it. misconfigured, unless nil, hears the error of a
// request answered 500.
func limit(keyFor func(*http.Request) string, acquire func(ctx context.Context, key string) (Result, error),
	misconfigured func(error)) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			key := keyFor(r)
			if key == "" {
				next.ServeHTTP(w, r)
				return
			}
			res, err := acquire(r.Context(), key)
			setHeaders := func(h http.Header) { SetHeaders(h, res) }
			if answer(w, r, next, Status(res, err), err, setHeaders) == http.StatusInternalServerError && misconfigured != nil {
				misconfigured(err)
			}
		})
	}
}

// answer passes a limited request to next or answers it, from the outcome
// of its acquire or take (status and err: see Status), with the headers
// setHeaders writes, and returns the status it answered with: 0 when it
// passed the request on or dropped it because its client went away.
func answer(w http.ResponseWriter, r *http.Request, next http.Handler, status int, err error, setHeaders func(http.Header)) int {
	if err != nil && r.Context().Err() != nil {
		return 0
	}
	setHeaders(w.Header())
	if status == 0 {
		next.ServeHTTP(w, r)
		return 0
	}
	http.Error(w, http.StatusText(status), status)
	return status
}
