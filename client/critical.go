package client

import (
	"context"
	"net/http"
)

// A bucket may keep a reserve: tokens that only requests marked critical
// may take (docs/protocol.md, "Reserve"). A request is marked in its
// context, so that one mark covers every call made for it (Acquire,
// AcquireKey, AcquireAll, Wait, the middleware, memlimit) and Acquirer
// keeps its one method.

// criticalKey is the context key of the critical mark.
type criticalKey struct{}

// Critical returns a copy of ctx that marks the requests made with it
// critical: they may take a bucket's reserve, which every other request
// leaves. Buckets without a reserve answer them as any other. The mark
// travels with the context, so calls made further down for the same work
// are critical too; use the parent context for those that are not.
func Critical(ctx context.Context) context.Context {
	if IsCritical(ctx) {
		return ctx
	}
	return context.WithValue(ctx, criticalKey{}, true)
}

// IsCritical reports whether ctx marks its requests critical (Critical).
func IsCritical(ctx context.Context) bool {
	v, _ := ctx.Value(criticalKey{}).(bool)
	return v
}

// CriticalWhen returns middleware that marks the requests for which
// critical reports true critical (Critical on the request's context), so
// that a limiting middleware after it (Middleware, KeyMiddleware) lets
// them take the buckets' reserves. Put it before the limiter:
//
//	h = client.CriticalWhen(isPayment)(client.Middleware(l, bucketFor)(h))
//
// Decide from what a client cannot forge (the route, an authenticated
// caller), not from a header anyone can send.
func CriticalWhen(critical func(*http.Request) bool) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if critical(r) {
				r = r.WithContext(Critical(r.Context()))
			}
			next.ServeHTTP(w, r)
		})
	}
}
