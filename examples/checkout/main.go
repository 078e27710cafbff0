// Command checkout is a small HTTP service whose /checkout route is
// protected by a Sluice token bucket. Start the whole product with
//
//	go run -tags dev ./cmd/admin -dev
//
// which prints the Redis address of its embedded Redis, then
//
//	go run ./examples/checkout -redis 127.0.0.1:PORT
//	curl -i localhost:8090/checkout
//
// The -dev stack seeds the app "demo" and the bucket "demo-api" that this
// service uses. Hit the route quickly and it answers 429 with Retry-After;
// the console's page of demo-api charts the allowed and denied calls, which
// this service counts in Redis.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/client/usage"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "checkout:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("checkout", flag.ContinueOnError)
	redisAddr := fs.String("redis", "127.0.0.1:6379", "Redis address (the -dev stack prints it)")
	listen := fs.String("listen", "127.0.0.1:8090", "address to serve on")
	app := fs.String("app", "demo", "this service's app name in Sluice")
	bucket := fs.String("bucket", "demo-api", "bucket that guards /checkout")
	if err := fs.Parse(args); err != nil {
		return err
	}

	rdb := redis.NewClient(&redis.Options{Addr: *redisAddr})
	defer rdb.Close()
	// Usage counts: every decision is counted in memory and written to
	// Redis about once a second, for the console's charts of this bucket.
	// Close writes the last counts, so it runs after the limiter's Close.
	rec, err := usage.NewRecorder(rdb, *app)
	if err != nil {
		return err
	}
	defer rec.Close()
	// Local fallback: if Redis goes away, keep serving at this instance's
	// share of the rate instead of failing every request or none.
	limiter, err := client.New(rdb, *app, client.WithFailurePolicy(client.FailLocal),
		client.WithObserver(rec.Observe))
	if err != nil {
		return err
	}
	defer limiter.Close()

	mux := http.NewServeMux()
	limited := client.Middleware(limiter, func(*http.Request) string { return *bucket })
	mux.Handle("GET /checkout", limited(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "order placed")
	})))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })

	srv := &http.Server{Addr: *listen, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	slog.New(slog.NewTextHandler(stdout, nil)).Info("serving", "addr", "http://"+*listen+"/checkout", "bucket", *bucket, "app", *app)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
