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

// TestCriticalWhen: the routes marked critical take the bucket's reserve,
// which the others leave.
func TestCriticalWhen(t *testing.T) {
	gin.SetMode(gin.TestMode)
	rdb, prefix := testenv.Redis(t)
	ks := redisscript.Keyspace{Prefix: prefix}
	cfg := redisscript.Config{Name: "api", ID: 1, Version: 1, Capacity: 3, PermitsMicro: 1_000_000,
		PeriodSeconds: 3600, Apps: []string{"web"}, Reserve: 2}
	if _, err := redisscript.Apply(context.Background(), rdb, ks, cfg, false); err != nil {
		t.Fatal(err)
	}
	l, err := client.New(rdb, "web", client.WithKeyPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	r := gin.New()
	r.Use(ginlimit.CriticalWhen(func(c *gin.Context) bool { return c.FullPath() == "/pay" }),
		ginlimit.Middleware(l, func(*gin.Context) string { return "api" }))
	for _, p := range []string{"/pay", "/browse"} {
		r.GET(p, func(c *gin.Context) { c.String(200, "ok") })
	}
	serve := func(path string) int {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code
	}
	for i, s := range []struct {
		path string
		want int
	}{{"/browse", 200}, {"/browse", 429}, {"/pay", 200}, {"/pay", 200}, {"/pay", 429}} {
		if got := serve(s.path); got != s.want {
			t.Fatalf("request %d, %s: %d, want %d", i+1, s.path, got, s.want)
		}
	}
}
