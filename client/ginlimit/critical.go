package ginlimit

import (
	"github.com/gin-gonic/gin"

	"github.com/sluicehq/sluice/client"
)

// CriticalWhen marks the requests for which critical reports true critical
// (client.Critical on the request's context), so that Middleware and
// KeyMiddleware after it let them take the buckets' reserves, like
// client.CriticalWhen: r.Use(ginlimit.CriticalWhen(isPayment),
// ginlimit.Middleware(l, bucketFor)). Decide from what a client cannot
// forge (the route, an authenticated caller), not from a header anyone can
// send.
func CriticalWhen(critical func(*gin.Context) bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		if critical(c) {
			c.Request = c.Request.WithContext(client.Critical(c.Request.Context()))
		}
		c.Next()
	}
}
