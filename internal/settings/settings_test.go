package settings

import (
	"errors"
	"flag"
	"strings"
	"testing"
	"time"
)

func TestFlagWinsOverEnvironment(t *testing.T) {
	env := map[string]string{"X_ADDR": "env:1", "X_WAIT": "30", "X_ON": "true", "X_LIST": "a, b,,c", "X_N": "7"}
	addr, wait, on, n := "def:0", time.Second, false, 1
	var list []string
	s := New("x", "x", func(k string) string { return env[k] }, &strings.Builder{})
	s.String(&addr, "addr", "X_ADDR", "address")
	s.Duration(&wait, "wait", "X_WAIT", "wait")
	s.Bool(&on, "on", "X_ON", "on")
	s.List(&list, "list", "X_LIST", "list")
	s.Int(&n, "n", "X_N", "n")
	if err := s.Parse([]string{"-addr", "flag:2", "-on=false"}); err != nil {
		t.Fatal(err)
	}
	if addr != "flag:2" || wait != 30*time.Second || on || strings.Join(list, "|") != "a|b|c" || n != 7 {
		t.Fatalf("addr %q wait %v on %v list %q n %d", addr, wait, on, list, n)
	}
	var alone bool
	s = New("x", "x", func(string) string { return "" }, &strings.Builder{})
	s.Bool(&alone, "alone", "", "a bool flag given without a value")
	if err := s.Parse([]string{"-alone"}); err != nil || !alone {
		t.Fatalf("-alone: %v %v", alone, err)
	}
}

func TestMalformedValuesNameTheirSetting(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{map[string]string{"X_WAIT": "soon"}, nil, "X_WAIT"},
		{nil, []string{"-wait", "soon"}, "-wait"},
		{map[string]string{"X_N": "many"}, nil, "X_N"},
		{map[string]string{"X_ON": "yes please"}, nil, "X_ON"},
	} {
		var wait time.Duration
		var n int
		var on bool
		s := New("x", "x", func(k string) string { return tc.env[k] }, &strings.Builder{})
		s.Duration(&wait, "wait", "X_WAIT", "wait")
		s.Int(&n, "n", "X_N", "n")
		s.Bool(&on, "on", "X_ON", "on")
		err := s.Parse(tc.args)
		var ue UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v %v: %v, want a usage error naming %s", tc.env, tc.args, err, tc.want)
		}
		if ExitCode("x", err, &strings.Builder{}) != 2 {
			t.Errorf("a usage error does not exit with 2")
		}
	}
}

func TestHelpNeverShowsSecrets(t *testing.T) {
	var out strings.Builder
	secret := ""
	s := New("x", "x [flags]", func(k string) string { return map[string]string{"X_SECRET": "hunter2"}[k] }, &out)
	s.Secret(&secret, "secret", "X_SECRET", "a password")
	s.Footer("Subcommands:\n  x sub\n")
	err := s.Parse([]string{"-h"})
	if !errors.Is(err, flag.ErrHelp) || ExitCode("x", err, &strings.Builder{}) != 0 {
		t.Fatalf("-h: %v", err)
	}
	if strings.Contains(out.String(), "hunter2") || !strings.Contains(out.String(), "X_SECRET") ||
		!strings.Contains(out.String(), "Subcommands:") {
		t.Fatalf("help:\n%s", out.String())
	}
	if !strings.Contains(Table(s.Settings()), "| `X_SECRET` | `-secret` | secret |") {
		t.Fatalf("table: %s", Table(s.Settings()))
	}
}
