package ginlimit_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/client/ginlimit"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/redisscript/testenv"
)

func TestMiddleware(t *testing.T) {
	gin.SetMode(gin.TestMode)
	rdb, prefix := testenv.Redis(t)
	ks := redisscript.Keyspace{Prefix: prefix}
	cfg := redisscript.Config{Name: "search", ID: 1, Version: 1, Capacity: 1, PermitsMicro: 1_000_000,
		PeriodSeconds: 60, Apps: []string{"web"}}
	if _, err := redisscript.Apply(context.Background(), rdb, ks, cfg, false); err != nil {
		t.Fatal(err)
	}
	l, err := client.New(rdb, "web", client.WithKeyPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	r := gin.New()
	limited := r.Group("/", ginlimit.Middleware(l, func(c *gin.Context) string { return c.FullPath()[1:] }))
	limited.GET("/search", func(c *gin.Context) { c.String(200, "found") })
	limited.GET("/missing", func(c *gin.Context) { c.String(200, "found") })

	serve := func(path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec
	}
	if rec := serve("/search"); rec.Code != 200 || rec.Body.String() != "found" || rec.Header().Get("RateLimit-Limit") != "1" {
		t.Fatalf("first: %d %q %v", rec.Code, rec.Body, rec.Header())
	}
	rec := serve("/search")
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" || rec.Body.String() == "found" {
		t.Fatalf("second: %d %q %v", rec.Code, rec.Body, rec.Header())
	}
	if rec := serve("/missing"); rec.Code != 500 || rec.Body.String() == "found" {
		t.Fatalf("unknown bucket: %d %q", rec.Code, rec.Body)
	}
}
