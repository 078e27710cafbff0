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

func TestKeyMiddleware(t *testing.T) {
	gin.SetMode(gin.TestMode)
	rdb, prefix := testenv.Redis(t)
	ks := redisscript.Keyspace{Prefix: prefix}
	cfg := redisscript.Config{Name: "login", ID: 1, Version: 1, Capacity: 1, PermitsMicro: 1_000_000,
		PeriodSeconds: 60, Apps: []string{"web"}}
	if _, err := redisscript.ApplyKeyed(context.Background(), rdb, ks, cfg, false); err != nil {
		t.Fatal(err)
	}
	l, err := client.New(rdb, "web", client.WithKeyPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ip := client.ClientIP()
	r := gin.New()
	r.Use(ginlimit.KeyMiddleware(l, "login", func(c *gin.Context) string { return ip(c.Request) }))
	r.GET("/", func(c *gin.Context) { c.Status(http.StatusNoContent) })
	do := func(addr string) int {
		req := httptest.NewRequest("GET", "/", nil)
		req.RemoteAddr = addr
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		return w.Code
	}
	if got := do("192.0.2.1:1000"); got != http.StatusNoContent {
		t.Fatalf("first: %d", got)
	}
	if got := do("192.0.2.1:2000"); got != http.StatusTooManyRequests {
		t.Fatalf("same address again: %d", got)
	}
	if got := do("192.0.2.2:1000"); got != http.StatusNoContent {
		t.Fatalf("another address: %d", got)
	}
}
