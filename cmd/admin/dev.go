//go:build dev

package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/sluicehq/sluice/internal/devstack"
)

// serveDev is `-dev`: the whole product in this process. The in-memory
// MySQL-compatible engine and Redis listen on loopback, the sync loop runs,
// and an admin and a demo app are seeded; nothing survives the process.
func serveDev(ctx context.Context, cfg serveConfig, e env, log *slog.Logger) error {
	st, err := devstack.Start(ctx, devstack.Options{Logger: log})
	if err != nil {
		return fmt.Errorf("start development stack: %w", err)
	}
	defer st.Close()
	fmt.Fprintf(e.stderr, "Development mode: data is kept in memory only.\n"+
		"  sign in as %q with password %q\n"+
		"  Redis for clients: %s (bucket %q, app %q)\n"+
		"  decision service: gRPC %s (Envoy rate limit API, domain %q), HTTP http://%s/v1/acquire\n"+
		"  app token of %q: %s\n"+
		"  try: curl -i -X POST -H 'Authorization: Bearer %s' -d '{\"bucket\": \"%s\"}' http://%s/v1/acquire\n",
		devstack.AdminUser, st.AdminPassword, st.RedisAddr, devstack.DemoBucket, devstack.DemoApp,
		st.Decide.GRPCAddr, devstack.DemoDomain, st.Decide.HTTPAddr,
		devstack.DemoApp, st.Decide.Token,
		st.Decide.Token, devstack.DemoBucket, st.Decide.HTTPAddr)
	return serveWith(ctx, cfg, stores{db: st.DB, rdb: st.Redis, ks: st.Keyspace}, e.stderr, log)
}
