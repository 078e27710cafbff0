package memlimit_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/client/memlimit"
)

// A service's handler, limited by whatever client.Acquirer it is given: a
// client.Limiter in production, a memlimit.Limiter in its unit tests.
func newHandler(lim client.Acquirer) http.Handler {
	hello := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "hello") })
	return client.Middleware(lim, func(*http.Request) string { return "greetings" })(hello)
}

// Testing a rate-limited handler without Redis: two requests per second,
// on a clock the test moves.
func Example() {
	clock := memlimit.NewManualClock(time.Unix(0, 0))
	lim := memlimit.New("greeter", memlimit.WithClock(clock))
	if err := lim.Define("greetings", memlimit.Bucket{Capacity: 2, Permits: 2, Per: time.Second}); err != nil {
		panic(err)
	}
	h := newHandler(lim)
	get := func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		fmt.Printf("%d remaining=%s retry-after=%s\n", rec.Code, rec.Header().Get("RateLimit-Remaining"),
			rec.Header().Get("Retry-After"))
	}
	get()
	get()
	get() // the bucket is empty
	clock.Advance(500 * time.Millisecond)
	get() // one token refilled
	// Output:
	// 200 remaining=1 retry-after=
	// 200 remaining=0 retry-after=
	// 429 remaining=0 retry-after=1
	// 200 remaining=0 retry-after=
}

// A bucket's reserve: requests not marked critical leave it; those whose
// context is marked with client.Critical may take it.
func Example_reserve() {
	lim := memlimit.New("shop", memlimit.WithClock(memlimit.NewManualClock(time.Unix(0, 0))))
	if err := lim.Define("orders", memlimit.Bucket{Capacity: 3, Permits: 1, Per: time.Minute, Reserve: 2}); err != nil {
		panic(err)
	}
	ctx := context.Background()
	for _, critical := range []bool{false, false, true, true, true} {
		c := ctx
		if critical {
			c = client.Critical(ctx)
		}
		res, _ := lim.Acquire(c, "orders", 1)
		fmt.Printf("critical=%v allowed=%v remaining=%d\n", critical, res.Allowed, res.Remaining)
	}
	// Output:
	// critical=false allowed=true remaining=0
	// critical=false allowed=false remaining=0
	// critical=true allowed=true remaining=1
	// critical=true allowed=true remaining=0
	// critical=true allowed=false remaining=0
}
