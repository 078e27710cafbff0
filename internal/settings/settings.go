// Package settings binds a binary's configuration: every setting is a
// flag and a SLUICE_* environment variable at once (the flag wins), a
// secret comes from the environment only and is never printed, a value
// that does not parse is refused at once naming the flag or variable, and
// -h lists the settings with their variables and defaults, then the
// subcommands. Both binaries bind through it, and the README's tables are
// checked against what they bind.
package settings

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"
)

// UsageError is a mistake in the command line or the environment: the
// process exits with code 2 and the message names what to fix.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// Usagef returns a UsageError with a formatted message.
func Usagef(format string, args ...any) error { return UsageError{fmt.Errorf(format, args...)} }

// Setting describes one bound setting, as -h and the README show it.
type Setting struct {
	// Flag is the flag's name without the dash; "" for a variable only.
	Flag string
	// Env is the environment variable; "" for a flag only.
	Env string
	// Default is the default as text; "" for none. Secrets have none.
	Default string
	Usage   string
	// Secret settings are read from the environment only.
	Secret bool
}

type binding struct {
	Setting
	set func(string) error
}

// Set is the configuration of one command.
type Set struct {
	fs       *flag.FlagSet
	getenv   func(string) string
	out      io.Writer
	synopsis string
	footer   string
	bindings []*binding
}

// New returns a Set for the command named name ("sluice-admin serve"),
// reading the environment through getenv and writing -h to out.
func New(name, synopsis string, getenv func(string) string, out io.Writer) *Set {
	s := &Set{fs: flag.NewFlagSet(name, flag.ContinueOnError), getenv: getenv, out: out, synopsis: synopsis}
	s.fs.SetOutput(out)
	s.fs.Usage = s.usage
	return s
}

// Footer is printed after the settings by -h (the subcommands).
func (s *Set) Footer(text string) { s.footer = text }

// Settings lists what the Set binds, in the order bound.
func (s *Set) Settings() []Setting {
	out := make([]Setting, len(s.bindings))
	for i, b := range s.bindings {
		out[i] = b.Setting
	}
	return out
}

func (s *Set) bind(st Setting, def string, set func(string) error) {
	st.Default = def
	if st.Secret {
		st.Default = ""
	}
	b := &binding{Setting: st, set: set}
	s.bindings = append(s.bindings, b)
	if st.Flag != "" {
		s.fs.Func(st.Flag, st.Usage, set)
	}
}

// String binds a text setting; *p holds its default.
func (s *Set) String(p *string, flagName, env, usage string) {
	s.bind(Setting{Flag: flagName, Env: env, Usage: usage}, *p, func(v string) error { *p = v; return nil })
}

// Secret binds a text setting read from the environment only (so that it
// shows neither in -h nor in ps), or also from a flag when flagName is
// set, for commands run by hand; its value is never printed.
func (s *Set) Secret(p *string, flagName, env, usage string) {
	s.bind(Setting{Flag: flagName, Env: env, Usage: usage, Secret: true}, "", func(v string) error { *p = v; return nil })
}

// Bool binds a true/false setting.
func (s *Set) Bool(p *bool, flagName, env, usage string) {
	s.bind(Setting{Flag: flagName, Env: env, Usage: usage}, strconv.FormatBool(*p), func(v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return errors.New("want true or false")
		}
		*p = b
		return nil
	})
	if flagName != "" {
		// -flag alone means true, as with the standard flags.
		s.fs.Lookup(flagName).Value = boolValue{p}
	}
}

// Int binds a whole-number setting.
func (s *Set) Int(p *int, flagName, env, usage string) {
	s.bind(Setting{Flag: flagName, Env: env, Usage: usage}, strconv.Itoa(*p), func(v string) error {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return errors.New("want a whole number")
		}
		*p = n
		return nil
	})
}

// Duration binds a duration: a Go duration ("30s", "2m") or a bare number
// of seconds, the form people put in environment files.
func (s *Set) Duration(p *time.Duration, flagName, env, usage string) {
	s.bind(Setting{Flag: flagName, Env: env, Usage: usage}, p.String(), func(v string) error {
		d, err := ParseDuration(v)
		if err != nil {
			return err
		}
		*p = d
		return nil
	})
}

// List binds a comma-separated list.
func (s *Set) List(p *[]string, flagName, env, usage string) {
	s.bind(Setting{Flag: flagName, Env: env, Usage: usage}, strings.Join(*p, ","), func(v string) error {
		*p = SplitList(v)
		return nil
	})
}

// MySQLDSN binds the MySQL DSN every server binary needs, a secret.
func (s *Set) MySQLDSN(p *string) {
	s.Secret(p, "mysql-dsn", "SLUICE_MYSQL_DSN", "required: MySQL DSN, as user:password@tcp(host:port)/sluice (prefer the variable: flags show in ps)")
}

// LogLevel binds the level of the JSON logs every binary writes on stderr.
func (s *Set) LogLevel(p *slog.Level) {
	s.bind(Setting{Flag: "log-level", Env: "SLUICE_LOG_LEVEL", Usage: "debug, info, warn or error; JSON logs on stderr"},
		strings.ToLower(p.String()), func(v string) error {
			if err := p.UnmarshalText([]byte(v)); err != nil {
				return errors.New("want a log level: debug, info, warn or error")
			}
			return nil
		})
}

// StartupTimeout binds how long a server waits for its stores at start-up.
func (s *Set) StartupTimeout(p *time.Duration) {
	s.Duration(p, "startup-timeout", "SLUICE_STARTUP_TIMEOUT", "how long to wait for MySQL and Redis at start-up")
}

// Parse reads the environment, then args, whose flags override it. A
// value that does not parse is a UsageError naming its variable or flag;
// -h prints the help and returns flag.ErrHelp.
func (s *Set) Parse(args []string) error {
	for _, b := range s.bindings {
		if b.Env == "" {
			continue
		}
		v := strings.TrimSpace(s.getenv(b.Env))
		if v == "" {
			continue
		}
		if err := b.set(v); err != nil {
			if b.Secret {
				return Usagef("%s: %v", b.Env, err)
			}
			return Usagef("%s=%q: %v", b.Env, v, err)
		}
	}
	if err := s.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return UsageError{err}
	}
	return nil
}

// Args are the arguments left after the flags.
func (s *Set) Args() []string { return s.fs.Args() }

// NoArgs refuses arguments left after the flags.
func (s *Set) NoArgs() error {
	if s.fs.NArg() > 0 {
		return Usagef("unexpected argument %q", s.fs.Arg(0))
	}
	return nil
}

func (s *Set) usage() {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: %s\n\n", s.synopsis)
	if len(s.bindings) > 0 {
		b.WriteString("Settings (a flag wins over its environment variable):\n")
	}
	for _, st := range s.bindings {
		switch {
		case st.Flag != "" && st.Env != "":
			fmt.Fprintf(&b, "  -%s, %s\n", st.Flag, st.Env)
		case st.Flag != "":
			fmt.Fprintf(&b, "  -%s\n", st.Flag)
		default:
			fmt.Fprintf(&b, "  %s\n", st.Env)
		}
		fmt.Fprintf(&b, "    \t%s", st.Usage)
		switch {
		case st.Secret:
			b.WriteString(" (secret: never shown)")
		case st.Default != "":
			fmt.Fprintf(&b, " (default %s)", st.Default)
		}
		b.WriteString("\n")
	}
	if s.footer != "" {
		b.WriteString("\n" + s.footer)
	}
	_, _ = io.WriteString(s.out, b.String())
}

// boolValue is a flag.Value that may be given without a value.
type boolValue struct{ p *bool }

func (v boolValue) String() string {
	if v.p == nil {
		return "false"
	}
	return strconv.FormatBool(*v.p)
}

func (v boolValue) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return errors.New("want true or false")
	}
	*v.p = b
	return nil
}

func (v boolValue) IsBoolFlag() bool { return true }

// ParseDuration reads a Go duration ("30s", "1m30s") or a bare number of
// seconds ("30").
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.Atoi(s); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, errors.New(`want a duration like "30s", "2m" or a number of seconds`)
	}
	return d, nil
}

// SplitList splits a comma-separated list, dropping empty items.
func SplitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// ExitCode reports err on stderr as program and returns the process exit
// code: 0 on success or after -h, 2 on a UsageError, 1 otherwise.
func ExitCode(program string, err error, stderr io.Writer) int {
	var ue UsageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "%s: %v\nRun %s -h for the settings and subcommands.\n", program, err, program)
		return 2
	default:
		fmt.Fprintf(stderr, "%s: %v\n", program, err)
		return 1
	}
}
