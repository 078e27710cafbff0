package router

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
)

// twoAreas is a router with a pages area and an API area, each marking
// its answers with a header and a body of its own.
func twoAreas(t *testing.T, proxies []string) *Router {
	t.Helper()
	rt, err := New(Config{TrustedProxies: proxies, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	area := func(name string) Area {
		return Area{
			Headers:          func(h http.Header) { h.Set("X-Area", name) },
			Fail:             func(c *gin.Context, err error) { c.String(500, name+" failed") },
			NotFound:         func(c *gin.Context) { c.String(404, name+" not found") },
			MethodNotAllowed: func(c *gin.Context) { c.String(405, name+" method") },
		}
	}
	pages := area("pages")
	pages.Guard = func(c *gin.Context) {
		if c.GetHeader("X-Refuse") != "" {
			c.String(403, "pages refused")
			c.Abort()
			return
		}
		c.Next()
	}
	p := rt.Area(pages)
	p.GET("/addr", func(c *gin.Context) { c.String(200, ClientAddr(c)) })
	p.GET("/panic", func(*gin.Context) { panic("boom") })
	a := area("api")
	a.Prefix = "/api/v1"
	a.Unclean = func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(404)
		_, _ = w.Write([]byte("api unclean"))
	}
	g := rt.Area(a)
	g.GET("/things", func(c *gin.Context) { c.String(200, "things") })
	g.GET("/panic", func(*gin.Context) { panic("boom") })
	return rt
}

func TestAreasShareOneStack(t *testing.T) {
	rt := twoAreas(t, nil)
	for _, tt := range []struct {
		method, path, header string
		status               int
		area, body           string
	}{
		{"GET", "/api/v1/things", "", 200, "api", "things"},
		{"GET", "/api/v1/nope", "", 404, "api", "api not found"},
		{"POST", "/api/v1/things", "", 405, "api", "api method"},
		{"GET", "/api/v1/things/", "", 404, "api", "api unclean"},
		{"GET", "/api/v1//things", "", 404, "api", "api unclean"},
		{"GET", "/api/v1/panic", "", 500, "api", "api failed"},
		{"GET", "/api/v2", "", 404, "pages", "pages not found"},
		{"GET", "/panic", "", 500, "pages", "pages failed"},
		{"POST", "/addr", "", 405, "pages", "pages method"},
		{"GET", "/addr", "refuse", 403, "pages", "pages refused"},
		{"GET", "/nope", "refuse", 403, "pages", "pages refused"},
	} {
		r := httptest.NewRequest(tt.method, tt.path, nil)
		if tt.header != "" {
			r.Header.Set("X-Refuse", "1")
		}
		w := httptest.NewRecorder()
		rt.ServeHTTP(w, r)
		if w.Code != tt.status || w.Header().Get("X-Area") != tt.area || w.Body.String() != tt.body {
			t.Errorf("%s %s: %d %q %q, want %d %q %q", tt.method, tt.path, w.Code, w.Header().Get("X-Area"),
				w.Body.String(), tt.status, tt.area, tt.body)
		}
	}
}

func TestClientAddrBelievesOnlyTrustedProxies(t *testing.T) {
	for _, tt := range []struct {
		proxies []string
		want    string
	}{
		{nil, "127.0.0.1"},
		{[]string{"127.0.0.1"}, "203.0.113.5"},
	} {
		rt := twoAreas(t, tt.proxies)
		r := httptest.NewRequest("GET", "/addr", nil)
		r.RemoteAddr = "127.0.0.1:4321"
		r.Header.Set("X-Forwarded-For", "203.0.113.5")
		w := httptest.NewRecorder()
		rt.ServeHTTP(w, r)
		if w.Body.String() != tt.want {
			t.Errorf("proxies %v: client address %q, want %q", tt.proxies, w.Body.String(), tt.want)
		}
	}
}

func TestBodyIsCapped(t *testing.T) {
	rt, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	g := rt.Area(Area{Fail: func(c *gin.Context, _ error) { c.Status(500) }, NotFound: func(c *gin.Context) { c.Status(404) },
		MethodNotAllowed: func(c *gin.Context) { c.Status(405) }})
	g.POST("/body", func(c *gin.Context) {
		buf := make([]byte, MaxBodyBytes+10)
		n, err := c.Request.Body.Read(buf)
		for err == nil {
			var m int
			m, err = c.Request.Body.Read(buf[n:])
			n += m
		}
		if n > MaxBodyBytes {
			c.Status(200)
			return
		}
		c.Status(413)
	})
	r := httptest.NewRequest("POST", "/body", bytes.NewReader(make([]byte, MaxBodyBytes+1)))
	w := httptest.NewRecorder()
	rt.ServeHTTP(w, r)
	if w.Code != 413 {
		t.Fatalf("a body over the cap was read whole: %d", w.Code)
	}
}
