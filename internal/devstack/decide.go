package devstack

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/apptokens"
	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/decision"
	"github.com/sluicehq/sluice/internal/descriptors"
)

// Demo decision service settings seeded into a new stack.
const (
	// DemoDomain is the Envoy rate limit domain of the demo mapping:
	// descriptor generic_key=demo-api takes from DemoBucket.
	DemoDomain = "demo"
)

// Decide is the embedded decision service of a stack.
type Decide struct {
	// GRPCAddr serves Envoy's rate limit service API; HTTPAddr serves
	// /v1/acquire. Both on loopback.
	GRPCAddr, HTTPAddr string
	// Token is an app token of DemoApp, to call them with.
	Token string

	srv *decision.Server
}

// startDecide seeds an app token and a descriptor mapping for the demo app
// and starts the decision service on loopback ports.
func (st *Stack) startDecide(ctx context.Context, log *slog.Logger, clientOpts []client.Option) error {
	actor := audit.Actor{User: AdminUser, Via: "dev"}
	token, _, err := apptokens.NewStore(st.DB).Create(ctx, actor, DemoApp, "dev gateway", nil)
	if err != nil {
		return fmt.Errorf("seed app token: %w", err)
	}
	if err := descriptors.NewStore(st.DB).Create(ctx, actor, &descriptors.Mapping{
		App: DemoApp, Domain: DemoDomain, Bucket: DemoBucket,
		Entries:     []descriptors.Entry{{Key: "generic_key", Value: DemoBucket}},
		Description: "Seeded by -dev",
	}); err != nil {
		return fmt.Errorf("seed descriptor mapping: %w", err)
	}
	srv, err := decision.Start(ctx, decision.ServerConfig{
		DB: st.DB, Redis: st.Redis, KeyPrefix: st.Keyspace.Prefix,
		GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", CountUsage: true, Client: clientOpts,
		Logger: log.With("component", "decide"),
	})
	if err != nil {
		return fmt.Errorf("start decision service: %w", err)
	}
	st.Decide = Decide{GRPCAddr: srv.GRPCAddr(), HTTPAddr: srv.HTTPAddr(), Token: token, srv: srv}
	return nil
}

func (st *Stack) stopDecide() error {
	if st.Decide.srv == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := st.Decide.srv.Shutdown(ctx)
	st.Decide.srv = nil
	return err
}
