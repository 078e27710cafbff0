package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/redisscript/testenv"
)

// exampleRedis stands in for a deployment: a redis-server of the
// example's own holding bucket "orders-api" (2 tokens, refilling 1 per
// minute, for app "checkout"), as the sync worker would have written it.
// exampleTimeout keeps the examples' output the same on a machine so busy
// that a call misses the default 50 ms, which suits production.
var exampleTimeout = client.WithTimeout(time.Second)

func exampleRedis() (*redis.Client, func()) {
	srv, err := testenv.StartStandalone()
	if err != nil {
		log.Fatal(err)
	}
	rdb := redis.NewClient(srv.Options())
	cfg := redisscript.Config{Name: "orders-api", ID: 1, Version: 1, Capacity: 2, PermitsMicro: 1_000_000,
		PeriodSeconds: 60, Apps: []string{"checkout"}}
	if _, err := redisscript.Apply(context.Background(), rdb, redisscript.Keyspace{}, cfg, false); err != nil {
		log.Fatal(err)
	}
	return rdb, func() { rdb.Close(); srv.Stop() }
}

func Example() {
	rdb, stop := exampleRedis()
	defer stop()

	// One Limiter per app and process, shared by all goroutines.
	limiter, err := client.New(rdb, "checkout", exampleTimeout)
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()

	for range 3 {
		res, err := limiter.Acquire(context.Background(), "orders-api", 1)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("allowed=%v remaining=%d limit=%d retry after about %v\n",
			res.Allowed, res.Remaining, res.Limit, res.RetryAfter.Round(time.Minute))
	}
	// Output:
	// allowed=true remaining=1 limit=2 retry after about 0s
	// allowed=true remaining=0 limit=2 retry after about 0s
	// allowed=false remaining=0 limit=2 retry after about 1m0s
}

func ExampleLimiter_Acquire_errors() {
	rdb, stop := exampleRedis()
	defer stop()
	limiter, _ := client.New(rdb, "checkout", exampleTimeout)
	defer limiter.Close()

	ctx := context.Background()
	_, err := limiter.Acquire(ctx, "no-such-bucket", 1)
	fmt.Println(errors.Is(err, client.ErrUnknownBucket))
	_, err = limiter.Acquire(ctx, "orders-api", 3) // more than the capacity of 2: never possible
	fmt.Println(errors.Is(err, client.ErrExceedsCapacity))

	other, _ := client.New(rdb, "billing", exampleTimeout)
	defer other.Close()
	_, err = other.Acquire(ctx, "orders-api", 1)
	fmt.Println(errors.Is(err, client.ErrAppNotAllowed))
	// Output:
	// true
	// true
	// true
}

func ExampleLimiter_Allow() {
	rdb, stop := exampleRedis()
	defer stop()
	limiter, _ := client.New(rdb, "checkout", exampleTimeout)
	defer limiter.Close()

	for i := range 3 {
		if limiter.Allow(context.Background(), "orders-api") {
			fmt.Println(i, "served")
		} else {
			fmt.Println(i, "shed")
		}
	}
	// Output:
	// 0 served
	// 1 served
	// 2 shed
}

func ExampleLimiter_Wait() {
	rdb, stop := exampleRedis()
	defer stop()
	limiter, _ := client.New(rdb, "checkout", exampleTimeout)
	defer limiter.Close()

	// Queue for tokens, but give up after a second: the next one refills
	// in a minute, so Wait says at once that it cannot make it.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for i := range 3 {
		err := limiter.Wait(ctx, "orders-api", 1)
		fmt.Println(i, errors.Is(err, context.DeadlineExceeded))
	}
	// Output:
	// 0 false
	// 1 false
	// 2 true
}

func ExampleMiddleware() {
	rdb, stop := exampleRedis()
	defer stop()
	limiter, _ := client.New(rdb, "checkout", exampleTimeout)
	defer limiter.Close()

	mux := http.NewServeMux()
	mux.HandleFunc("/orders", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "order placed") })
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	// Each route picks its bucket; "" leaves a route unlimited.
	buckets := map[string]string{"/orders": "orders-api"}
	handler := client.Middleware(limiter, func(r *http.Request) string { return buckets[r.URL.Path] })(mux)

	for _, path := range []string{"/orders", "/orders", "/orders", "/health"} {
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		fmt.Printf("%s %d remaining=%q retry-after=%q\n", path, rec.Code,
			rec.Header().Get("RateLimit-Remaining"), rec.Header().Get("Retry-After"))
	}
	// Output:
	// /orders 200 remaining="1" retry-after=""
	// /orders 200 remaining="0" retry-after=""
	// /orders 429 remaining="0" retry-after="60"
	// /health 200 remaining="" retry-after=""
}

func ExampleWithFailurePolicy() {
	srv, err := testenv.StartStandalone()
	if err != nil {
		log.Fatal(err)
	}
	rdb := redis.NewClient(srv.Options())
	defer rdb.Close()
	cfg := redisscript.Config{Name: "orders-api", ID: 1, Version: 1, Capacity: 10, PermitsMicro: 1_000_000,
		PeriodSeconds: 60, Apps: []string{"checkout"}}
	redisscript.Apply(context.Background(), rdb, redisscript.Keyspace{}, cfg, false)

	quiet := client.WithLogger(nil)
	open, _ := client.New(rdb, "checkout", client.WithFailurePolicy(client.FailOpen), quiet)
	closed, _ := client.New(rdb, "checkout", client.WithFailurePolicy(client.FailClosed), quiet)
	// Two instances of the service: while Redis is away each runs a bucket
	// of half the capacity at half the rate, which starts empty and fills
	// only while Redis is away (here 1 token every 2 minutes).
	local, _ := client.New(rdb, "checkout", client.WithFailurePolicy(client.FailLocal), client.WithInstances(2), quiet)
	defer open.Close()
	defer closed.Close()
	defer local.Close()

	ctx := context.Background()
	local.Acquire(ctx, "orders-api", 1) // learns the config
	srv.Stop()                          // Redis goes away

	res, err := open.Acquire(ctx, "orders-api", 1)
	fmt.Println("open:", res.Allowed, res.Fallback, err)
	res, err = closed.Acquire(ctx, "orders-api", 1)
	fmt.Println("closed:", res.Allowed, res.Fallback, err)
	res, err = local.Acquire(ctx, "orders-api", 1)
	fmt.Println("local:", res.Allowed, res.Fallback, res.Limit, res.RetryAfter > time.Minute, err)
	// Output:
	// open: true true <nil>
	// closed: false true sluice: redis unavailable
	// local: false true 5 true <nil>
}

// A bucket with a reserve keeps tokens for requests marked critical:
// here "payments" holds 3 tokens, 2 of them for critical requests.
func ExampleCritical() {
	rdb, stop := exampleRedis()
	defer stop()
	cfg := redisscript.Config{Name: "payments", ID: 1, Version: 1, Capacity: 3, PermitsMicro: 1_000_000,
		PeriodSeconds: 60, Apps: []string{"checkout"}, Reserve: 2}
	if _, err := redisscript.Apply(context.Background(), rdb, redisscript.Keyspace{}, cfg, false); err != nil {
		log.Fatal(err)
	}
	limiter, err := client.New(rdb, "checkout", exampleTimeout)
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()

	ctx := context.Background()
	refresh, _ := limiter.Acquire(ctx, "payments", 1) // a background refresh: not critical
	again, _ := limiter.Acquire(ctx, "payments", 1)
	pay, _ := limiter.Acquire(client.Critical(ctx), "payments", 1) // a customer paying
	fmt.Println("refresh:", refresh.Allowed, "again:", again.Allowed, "pay:", pay.Allowed, pay.Remaining, "left")
	// Output: refresh: true again: false pay: true 1 left
}
