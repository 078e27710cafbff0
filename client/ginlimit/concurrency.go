package ginlimit

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/sluicehq/sluice/client"
)

// Concurrency limits the requests in progress like
// client.ConcurrencyMiddleware: each holds a slot of the concurrency limit
// limitFor names (empty: not limited) from before the rest of the chain
// runs until it returned, renewed every half lease time meanwhile. A full
// limit is answered 429 with Retry-After, a refusal by the failure policy
// 503 and a limit that cannot serve the app 500, with the RateLimit
// headers on every limited response.
func Concurrency(t client.SlotTaker, limitFor func(*gin.Context) string) gin.HandlerFunc {
	return func(c *gin.Context) {
		name := limitFor(c)
		if name == "" {
			c.Next()
			return
		}
		hold(c, func(ctx context.Context) (*client.Slot, error) { return t.TakeSlot(ctx, name) })
	}
}

// KeyConcurrency limits the requests in progress per key like
// client.KeyConcurrencyMiddleware: each holds a slot of the key keyFor
// returns (empty: not limited) of keyed concurrency limit limit.
func KeyConcurrency(t client.SlotTaker, limit string, keyFor func(*gin.Context) string) gin.HandlerFunc {
	return func(c *gin.Context) {
		key := keyFor(c)
		if key == "" {
			c.Next()
			return
		}
		hold(c, func(ctx context.Context) (*client.Slot, error) { return t.TakeSlotKey(ctx, limit, key) })
	}
}

// hold takes the request's slot through take, then runs the rest of the
// chain holding it, or refuses the request as Concurrency describes.
func hold(c *gin.Context, take func(context.Context) (*client.Slot, error)) {
	ctx := c.Request.Context()
	s, err := take(ctx)
	status := client.SlotStatus(s.SlotResult, err)
	if status == 0 {
		defer client.ReleaseAfter(ctx, s)()
	}
	respond(c, status, err, func(h http.Header) { client.SetSlotHeaders(h, s.SlotResult) })
}
