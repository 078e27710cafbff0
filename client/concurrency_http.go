package client

import (
	"context"
	"net/http"
)

// SetSlotHeaders writes the RateLimit-Limit and RateLimit-Remaining
// headers of a take (the free slots after it), and Retry-After in whole
// seconds (at least 1) when the take was denied. It writes nothing when
// the limit is unknown (fail open).
func SetSlotHeaders(h http.Header, r SlotResult) {
	// A token's values, but no reset: slots do not refill.
	limit, remaining, _, retryAfter := HeaderValues(r.Result())
	if limit != "" {
		h.Set("RateLimit-Limit", limit)
		h.Set("RateLimit-Remaining", remaining)
	}
	if retryAfter != "" {
		h.Set("Retry-After", retryAfter)
	}
}

// SlotStatus returns the HTTP status a middleware answers for a TakeSlot
// outcome, as Status does for an Acquire: 0 to let the request through,
// 429 when the limit is full, 503 when Redis is unavailable and the
// policy refuses, 500 when the limit cannot serve the app (unknown, app
// not allowed, not a concurrency limit).
func SlotStatus(r SlotResult, err error) int {
	return Status(Result{Allowed: r.Allowed}, err)
}

// ConcurrencyMiddleware limits the requests in progress: each holds a
// slot, as t's app, of the concurrency limit limitFor names, from before
// the handler runs until it returned (renewed every half lease time
// meanwhile, so a long request keeps its slot); an empty name lets the
// request through unlimited. A full limit is answered 429 with
// Retry-After (when the first slot expires at the latest), a refusal by
// the failure policy 503 and a limit that cannot serve the app 500 (see
// SlotStatus), with the RateLimit headers on every limited response. A
// request whose client went away is dropped.
func ConcurrencyMiddleware(t SlotTaker, limitFor func(*http.Request) string) func(http.Handler) http.Handler {
	return holdSlot(limitFor, t.TakeSlot)
}

// KeyConcurrencyMiddleware limits the requests in progress per key: each
// holds a slot of the key keyFor returns of keyed concurrency limit limit
// (an empty key: not limited), as ConcurrencyMiddleware does.
func KeyConcurrencyMiddleware(t SlotTaker, limit string, keyFor func(*http.Request) string) func(http.Handler) http.Handler {
	return holdSlot(keyFor, func(ctx context.Context, key string) (*Slot, error) {
		return t.TakeSlotKey(ctx, limit, key)
	})
}

func holdSlot(nameFor func(*http.Request) string, take func(ctx context.Context, name string) (*Slot, error)) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			name := nameFor(r)
			if name == "" {
				next.ServeHTTP(w, r)
				return
			}
			s, err := take(r.Context(), name)
			status := SlotStatus(s.SlotResult, err)
			if status == 0 {
				defer ReleaseAfter(r.Context(), s)()
			}
			answer(w, r, next, status, err, func(h http.Header) { SetSlotHeaders(h, s.SlotResult) })
		})
	}
}

// ReleaseAfter keeps slot s alive (KeepAlive) and returns the function
// that stops that and releases it, for a middleware to defer: the release
// is sent even when ctx (a request's) has ended.
func ReleaseAfter(ctx context.Context, s *Slot) func() {
	stop := s.KeepAlive()
	return func() {
		stop()
		_, _ = s.Release(context.WithoutCancel(ctx))
	}
}
