package startup

import (
	"context"
	"io"
	"log/slog"
	"os"
)

// Worker is a binary that reads its configuration and serves until its
// context ends, with a `healthcheck` subcommand that probes a running one:
// sluice-sync and sluice-decide. C is its configuration.
type Worker[C any] struct {
	Program string
	// HealthURL is what `healthcheck` probes when not given -url.
	HealthURL string
	Parse     func(args []string, getenv func(string) string, output io.Writer) (C, error)
	LogLevel  func(C) slog.Level
	Serve     func(ctx context.Context, cfg C, log *slog.Logger) error
}

// Run is the whole program: Main only adds signals and the exit code.
func (w Worker[C]) Run(ctx context.Context, args []string, getenv func(string) string) error {
	if len(args) > 0 && args[0] == "healthcheck" {
		return w.Healthcheck(ctx, args[1:], os.Stderr)
	}
	cfg, err := w.Parse(args, getenv, os.Stderr)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: w.LogLevel(cfg)}))
	return w.Serve(ctx, cfg, log)
}

// Healthcheck is the `healthcheck [-url URL]` subcommand.
func (w Worker[C]) Healthcheck(ctx context.Context, args []string, output io.Writer) error {
	return Healthcheck(ctx, w.Program, w.HealthURL, args, output)
}
