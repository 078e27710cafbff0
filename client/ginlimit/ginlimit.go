// Package ginlimit puts a Sluice Limiter in front of gin routes. It lives
// apart from package client so that services not using gin do not import it.
package ginlimit

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/sluicehq/sluice/client"
)

// Middleware limits requests like client.Middleware: each takes one token
// from the bucket bucketFor names (empty: not limited), answering 429 with
// Retry-After when denied, 503 when the failure policy refuses and 500 when
// the bucket cannot serve the Limiter's app, with the RateLimit headers on
// every limited response.
func Middleware(l client.Acquirer, bucketFor func(*gin.Context) string) gin.HandlerFunc {
	return func(c *gin.Context) {
		name := bucketFor(c)
		if name == "" {
			c.Next()
			return
		}
		answer(c, func(ctx context.Context) (client.Result, error) { return l.Acquire(ctx, name, 1) })
	}
}

// answer takes the request's token through acquire, then lets the request
// through or refuses it as Middleware describes.
func answer(c *gin.Context, acquire func(context.Context) (client.Result, error)) {
	res, err := acquire(c.Request.Context())
	respond(c, client.Status(res, err), err, func(h http.Header) { client.SetHeaders(h, res) })
}

// respond runs the rest of the chain or refuses the request, from the
// outcome of its acquire or take (status and err: see client.Status), with
// the headers setHeaders writes. A request whose client went away is
// dropped.
func respond(c *gin.Context, status int, err error, setHeaders func(http.Header)) {
	if err != nil && c.Request.Context().Err() != nil {
		c.Abort()
		return
	}
	setHeaders(c.Writer.Header())
	if status == 0 {
		c.Next()
		return
	}
	if err != nil {
		_ = c.Error(err)
	}
	c.AbortWithStatusJSON(status, gin.H{"error": http.StatusText(status)})
}
