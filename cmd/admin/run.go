package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/sluicehq/sluice/internal/settings"
)

// usageError is a mistake in the command line or the environment: exit
// code 2, and the message names what to fix.
type usageError = settings.UsageError

var usagef = settings.Usagef

// env is what a subcommand may use of the process: its arguments, the
// environment and the standard streams, passed in so tests can drive it.
type env struct {
	args   []string
	getenv func(string) string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

// run is the whole program: main only adds signals and the exit code.
func run(ctx context.Context, args []string, getenv func(string) string) error {
	return dispatch(ctx, env{args: args, getenv: getenv, stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr})
}

// subcommands maps a name to its implementation; "serve" is the default
// when the first argument is a flag or missing.
var subcommands = map[string]func(context.Context, env) error{
	"serve":        serve,
	"migrate":      migrate,
	"create-user":  createUser,
	"set-password": setPassword,
	"healthcheck":  healthcheck,
}

func dispatch(ctx context.Context, e env) error {
	name := "serve"
	if len(e.args) > 0 && !strings.HasPrefix(e.args[0], "-") {
		name, e.args = e.args[0], e.args[1:]
	}
	if name == "help" {
		fmt.Fprint(e.stdout, subcommandsText)
		return nil
	}
	cmd, ok := subcommands[name]
	if !ok {
		return usagef("unknown subcommand %q", name)
	}
	return cmd(ctx, e)
}

// subcommandsText ends -h of serve (the default) and answers `help`.
const subcommandsText = `Subcommands:
  sluice-admin [serve] [flags]        serve the console and the JSON API (the default)
  sluice-admin migrate up|down|version
  sluice-admin create-user -username NAME -password-stdin [-admin]
  sluice-admin set-password -username NAME -password-stdin
  sluice-admin healthcheck [-url URL]
  ` + devCommand + `   everything in one process, in memory

Run a subcommand with -h for its flags.
`

// newSettings returns the settings of a subcommand, reporting to e.stderr.
func newSettings(e env, name, synopsis string) *settings.Set {
	return settings.New("sluice-admin "+name, "sluice-admin "+synopsis, e.getenv, e.stderr)
}
