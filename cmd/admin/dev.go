//go:build dev

package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"

	"github.com/sluicehq/sluice/internal/devstack"
)

// serveDev is `-dev`: the whole product in this process. The in-memory
// MySQL-compatible engine and Redis listen on loopback, the sync loop runs,
// and an admin and a demo app are seeded; nothing survives the process.
func serveDev(ctx context.Context, cfg serveConfig, e env, log *slog.Logger) error {
	// The console's address first: when another instance holds it, say so
	// before seeding anything or printing a password that will not work.
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return fmt.Errorf("cannot listen on %s (%w): is another sluice already running there? "+
			"Start this one on another address, for example with -listen 127.0.0.1:8081", cfg.listen, err)
	}
	ln.Close()
	st, err := devstack.Start(ctx, devstack.Options{Logger: log})
	if err != nil {
		return fmt.Errorf("start development stack: %w", err)
	}
	defer st.Close()
	console := "http://" + cfg.listen
	fmt.Fprintf(e.stderr, "Development mode: data is kept in memory only.\n"+
		"  console: %s, sign in as %q with password %q\n"+
		"  Redis for clients: %s (buckets %q and %q, app %q)\n"+
		"  decision service: gRPC %s (Envoy rate limit API, domain %q), HTTP http://%s/v1/acquire\n"+
		"  app token of %q: %s\n"+
		"To use these from another terminal, paste this line into it:\n\n"+
		"export SLUICE_CONSOLE=%s SLUICE_REDIS=%s SLUICE_DECIDE=http://%s SLUICE_TOKEN=%s\n\n",
		console, devstack.AdminUser, st.AdminPassword, st.RedisAddr, devstack.DemoBucket, devstack.DemoHTTPBucket,
		devstack.DemoApp, st.Decide.GRPCAddr, devstack.DemoDomain, st.Decide.HTTPAddr, devstack.DemoApp, st.Decide.Token,
		console, st.RedisAddr, st.Decide.HTTPAddr, st.Decide.Token)
	return serveWith(ctx, cfg, stores{db: st.DB, rdb: st.Redis, ks: st.Keyspace}, e.stderr, log)
}
