package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/sluicehq/sluice/internal/limitsfile"
	"github.com/sluicehq/sluice/internal/settings"
)

// Exit codes.
const (
	exitOK       = 0
	exitError    = 1
	exitUsage    = 2
	exitChanges  = 3
	exitConflict = 4
)

const synopsis = "sluice-limits export|diff|apply|import-envoy [flags]"

const commands = `Commands:
  export        write the apps, buckets (with overrides) and mappings the token sees as YAML
  diff -f FILE  show what apply would change (exit 3 with -exit-code when it would change something)
  apply -f FILE make the live state match the file; deletes only with -prune
  import-envoy -f CONFIG  convert an envoyproxy/ratelimit configuration into a limits file

Exit codes: 0 done or no changes, 1 error, 2 usage, 3 diff -exit-code found changes,
4 conflict (an object was edited since the version the file carries; nothing changed).
Run "sluice-limits COMMAND -h" for a command's flags.
`

// run is the whole command, with its streams and environment given, so
// that tests run it in-process.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintf(stderr, "Usage: %s\n\n%s", synopsis, commands)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	c := &command{name: args[0], stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv}
	var err error
	switch args[0] {
	case "export":
		err = c.export(ctx, args[1:])
	case "diff":
		err = c.diff(ctx, args[1:], false)
	case "apply":
		err = c.diff(ctx, args[1:], true)
	case "import-envoy":
		err = c.importEnvoy(args[1:])
	default:
		err = settings.Usagef("unknown command %q\n\n%s", args[0], commands)
	}
	var code exitCode
	var usage settings.UsageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &code):
		return int(code)
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "sluice-limits %s: %v\n", c.name, err)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "sluice-limits %s: %v\n", c.name, err)
		return exitError
	}
}

// exitCode ends the command with a code, its message already written.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit %d", int(e)) }

type command struct {
	name           string
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
}

// connection binds the server and token settings.
type connection struct {
	server, token string
}

func (c *command) flags(synopsis string, conn *connection) *settings.Set {
	s := settings.New("sluice-limits "+c.name, "sluice-limits "+synopsis, c.getenv, c.stderr)
	if conn != nil {
		conn.server = "http://127.0.0.1:8080"
		s.String(&conn.server, "server", "SLUICE_SERVER", "base URL of the console whose JSON API is used")
		s.Secret(&conn.token, "token", "SLUICE_TOKEN", "personal API token (prefer the variable: a flag shows in ps)")
	}
	return s
}

func (conn *connection) client() (*apiClient, error) {
	if conn.token == "" {
		return nil, settings.Usagef("no API token: set SLUICE_TOKEN (or -token) to a personal API token from the console's tokens page")
	}
	if !strings.HasPrefix(conn.server, "http://") && !strings.HasPrefix(conn.server, "https://") {
		return nil, settings.Usagef("-server %q must start with http:// or https://", conn.server)
	}
	return newClient(conn.server, conn.token), nil
}

func (c *command) export(ctx context.Context, args []string) error {
	var conn connection
	var out string
	var only []string
	var noVersions bool
	s := c.flags("export [-o FILE] [-app NAME,...] [-no-versions]", &conn)
	s.String(&out, "o", "", "file to write; empty means standard output")
	s.List(&only, "app", "", "export only these apps and their buckets and mappings (comma-separated); empty means every app the token sees")
	s.Bool(&noVersions, "no-versions", "", "leave the versions out (a file kept in Git); apply then checks only against what it reads just before writing")
	if err := parse(s, args); err != nil {
		return err
	}
	api, err := conn.client()
	if err != nil {
		return err
	}
	filter := map[string]bool{}
	for _, a := range only {
		filter[a] = true
	}
	live, err := api.live(ctx, filter)
	if err != nil {
		return err
	}
	for _, a := range only {
		found := false
		for _, la := range live.Apps {
			found = found || la.Name == a
		}
		if !found {
			return fmt.Errorf("app %q not found (or not visible to this token)", a)
		}
	}
	f := limitsfile.ToFile(live, !noVersions, only)
	header := "Sluice limits, exported from " + conn.server + ".\n" +
		"Apply with: sluice-limits apply -f FILE. Schema: docs/limits.schema.json."
	w := c.stdout
	if out != "" {
		fh, err := os.Create(out)
		if err != nil {
			return err
		}
		defer fh.Close()
		w = fh
		if err := limitsfile.Encode(w, f, header); err != nil {
			return err
		}
		return fh.Close()
	}
	return limitsfile.Encode(w, f, header)
}

// diff runs diff or, with apply, apply: both read the file, the live
// state and compute the plan the same way.
func (c *command) diff(ctx context.Context, args []string, apply bool) error {
	var conn connection
	var file string
	var prune, exitCodeFlag bool
	syn := "diff -f FILE [-prune] [-exit-code]"
	if apply {
		syn = "apply -f FILE [-prune]"
	}
	s := c.flags(syn, &conn)
	s.String(&file, "f", "", `limits file to compare ("-" reads standard input)`)
	s.Bool(&prune, "prune", "", "delete the buckets, overrides and mappings of the file's apps that the file does not list")
	if !apply {
		s.Bool(&exitCodeFlag, "exit-code", "", "exit with 3 when there are changes (for CI)")
	}
	if err := parse(s, args); err != nil {
		return err
	}
	if file == "" {
		return settings.Usagef("-f FILE is required")
	}
	desired, err := c.readFile(file)
	if err != nil {
		return err
	}
	api, err := conn.client()
	if err != nil {
		return err
	}
	managed := map[string]bool{}
	for _, a := range desired.Apps {
		managed[a.Name] = true
	}
	live, err := api.live(ctx, managed)
	if err != nil {
		return err
	}
	plan := limitsfile.Compute(desired, live, prune)
	var b strings.Builder
	plan.Write(&b)
	_, _ = io.WriteString(c.stdout, b.String())
	switch {
	case len(plan.Conflicts) > 0:
		fmt.Fprintf(c.stderr, "sluice-limits %s: %d conflict(s); nothing was changed\n", c.name, len(plan.Conflicts))
		return exitCode(exitConflict)
	case len(plan.Errors) > 0:
		fmt.Fprintf(c.stderr, "sluice-limits %s: %d change(s) the API cannot make; nothing was changed\n", c.name, len(plan.Errors))
		return exitCode(exitError)
	case !apply:
		if exitCodeFlag && !plan.Empty() {
			return exitCode(exitChanges)
		}
		return nil
	}
	for i := range plan.Changes {
		ch := &plan.Changes[i]
		if err := api.apply(ctx, ch); err != nil {
			fmt.Fprintf(c.stdout, "failed: %s %s\n", ch.Op, ch.Subject())
			fmt.Fprintf(c.stderr, "sluice-limits apply: %s: %v\n", ch.Subject(), err)
			fmt.Fprintf(c.stderr, "sluice-limits apply: %d of %d change(s) applied before this one; run diff to see what is left\n", i, len(plan.Changes))
			if errors.Is(err, errConflict) {
				fmt.Fprintf(c.stderr, "sluice-limits apply: %s was changed by someone else since it was read; nothing of theirs was overwritten\n", ch.Subject())
				return exitCode(exitConflict)
			}
			return exitCode(exitError)
		}
	}
	if !plan.Empty() {
		fmt.Fprintf(c.stdout, "Applied %d change(s).\n", len(plan.Changes))
	}
	return nil
}

// readFile decodes and checks a limits file ("-" is standard input).
func (c *command) readFile(name string) (*limitsfile.Desired, error) {
	var r io.Reader = c.stdin
	if name != "-" {
		fh, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer fh.Close()
		r = fh
	}
	f, lines, err := limitsfile.Decode(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	d, err := limitsfile.Check(f, lines)
	if err != nil {
		var ps limitsfile.Problems
		if errors.As(err, &ps) {
			for _, p := range ps {
				fmt.Fprintf(c.stderr, "%s: %s\n", name, p)
			}
			return nil, fmt.Errorf("%s: %d problem(s); nothing was read from or sent to the server", name, len(ps))
		}
		return nil, err
	}
	return d, nil
}

func parse(s *settings.Set, args []string) error {
	if err := s.Parse(args); err != nil {
		return err
	}
	return s.NoArgs()
}
