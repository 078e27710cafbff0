package ginlimit

import (
	"net/http"

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
		ctx := c.Request.Context()
		res, err := l.AcquireKey(ctx, bucket, key, 1)
		if err != nil && ctx.Err() != nil {
			c.Abort()
			return
		}
		client.SetHeaders(c.Writer.Header(), res)
		status := client.Status(res, err)
		if status == 0 {
			c.Next()
			return
		}
		if err != nil {
			_ = c.Error(err)
		}
		c.AbortWithStatusJSON(status, gin.H{"error": http.StatusText(status)})
	}
}
