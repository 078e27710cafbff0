package usage_test

import (
	"context"
	"log"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/client/clientmetrics"
	"github.com/sluicehq/sluice/client/usage"
)

// A service counts its usage for the console and exports Prometheus
// metrics: one observer calls both.
func Example() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()

	rec, err := usage.NewRecorder(rdb, "checkout")
	if err != nil {
		log.Fatal(err)
	}
	defer rec.Close() // writes the last second's counts

	m, err := clientmetrics.New(prometheus.DefaultRegisterer, "checkout")
	if err != nil {
		log.Fatal(err)
	}
	lim, err := client.New(rdb, "checkout", client.WithObserver(func(d client.Decision) {
		rec.Observe(d)
		m.Observe(d)
	}))
	if err != nil {
		log.Fatal(err)
	}
	defer lim.Close()

	if lim.Allow(context.Background(), "payments-api") {
		// call the payments API
	}
}
