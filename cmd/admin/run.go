package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// usageError is a mistake in the command line or the environment: exit
// code 2, and the message names what to fix.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

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
		fmt.Fprint(e.stdout, usageText)
		return nil
	}
	cmd, ok := subcommands[name]
	if !ok {
		return usagef("unknown subcommand %q", name)
	}
	return cmd(ctx, e)
}

const usageText = `Usage:
  sluice-admin [serve] [flags]        serve the web console (default)
  sluice-admin -dev                   everything in one process, in memory, for trying Sluice
  sluice-admin migrate up|down|version
  sluice-admin create-user -username NAME -password-stdin [-admin]
  sluice-admin set-password -username NAME -password-stdin
  sluice-admin healthcheck [-url URL]

Run a subcommand with -h for its flags and environment variables.
`

// newFlags returns a flag set for a subcommand that reports to e.stderr.
func newFlags(e env, name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet("sluice-admin "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "Usage: sluice-admin %s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args into fs, turning mistakes into usage errors and
// refusing stray arguments.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

// lookup returns the trimmed value of an environment variable and whether
// it is set to something.
func lookup(getenv func(string) string, key string) (string, bool) {
	v := strings.TrimSpace(getenv(key))
	return v, v != ""
}

// flagError turns a flag parsing failure into a usage error (or help).
func flagError(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	return usageError{err}
}
