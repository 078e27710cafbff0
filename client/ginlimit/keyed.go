package ginlimit

import (
	"context"

	"github.com/gin-gonic/gin"

	"github.com/sluicehq/sluice/client"
)

// KeyMiddleware limits requests per key like client.KeyMiddleware: each
// takes one token for the key keyFor returns (empty: not limited) from
// keyed bucket bucket. client.ClientIP and client.HeaderKey work on
// c.Request: KeyMiddleware(l, "login", func(c *gin.Context) string {
// return ip(c.Request) }).
func KeyMiddleware(l *client.Limiter, bucket string, keyFor func(*gin.Context) string) gin.HandlerFunc {
	return func(c *gin.Context) {
		key := keyFor(c)
		if key == "" {
			c.Next()
			return
		}
		answer(c, func(ctx context.Context) (client.Result, error) { return l.AcquireKey(ctx, bucket, key, 1) })
	}
}
