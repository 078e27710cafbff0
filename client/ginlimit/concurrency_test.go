package ginlimit_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/sluicehq/sluice/client/ginlimit"
	"github.com/sluicehq/sluice/client/memlimit"
)

// TestConcurrency: a request holds a slot while the rest of the chain
// runs; meanwhile another gets 429; afterwards the slot is free.
func TestConcurrency(t *testing.T) {
	gin.SetMode(gin.TestMode)
	l := memlimit.New("web")
	if err := l.Define("uploads", memlimit.Bucket{Capacity: 1, SlotLease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := l.Define("per-user", memlimit.Bucket{Capacity: 1, SlotLease: time.Minute, Keyed: true}); err != nil {
		t.Fatal(err)
	}
	r := gin.New()
	var inner *httptest.ResponseRecorder
	serve := func(path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec
	}
	r.GET("/upload", ginlimit.Concurrency(l, func(*gin.Context) string { return "uploads" }), func(c *gin.Context) {
		if c.Query("nested") == "1" {
			inner = serve("/upload") // a second request while this one holds the slot
		}
		c.String(200, "done")
	})
	r.GET("/user/:id", ginlimit.KeyConcurrency(l, "per-user", func(c *gin.Context) string { return c.Param("id") }),
		func(c *gin.Context) {
			if c.Query("nested") != "" {
				inner = serve("/user/" + c.Query("nested"))
			}
			c.String(200, "done")
		})

	if rec := serve("/upload?nested=1"); rec.Code != 200 || rec.Header().Get("RateLimit-Limit") != "1" {
		t.Fatalf("outer: %d %v", rec.Code, rec.Header())
	}
	if inner.Code != http.StatusTooManyRequests || inner.Header().Get("Retry-After") == "" {
		t.Errorf("while the slot is held: %d %v", inner.Code, inner.Header())
	}
	if n, _ := l.InUse("uploads", ""); n != 0 {
		t.Errorf("%d slots in use after the request", n)
	}
	if rec := serve("/upload"); rec.Code != 200 {
		t.Errorf("after the release: %d", rec.Code)
	}
	// Per key: another key is not held back, the same key is.
	if rec := serve("/user/ann?nested=bob"); rec.Code != 200 || inner.Code != 200 {
		t.Errorf("another key: %d, inner %d", rec.Code, inner.Code)
	}
	if rec := serve("/user/ann?nested=ann"); rec.Code != 200 || inner.Code != http.StatusTooManyRequests {
		t.Errorf("the same key: %d, inner %d", rec.Code, inner.Code)
	}
}
