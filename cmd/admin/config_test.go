package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
)

// TestHelpHidesSecretsAndListsSubcommands: -h shows every setting with its
// variable, never a secret's value, and ends with the subcommands.
func TestHelpHidesSecretsAndListsSubcommands(t *testing.T) {
	var out strings.Builder
	secrets := map[string]string{"SLUICE_MYSQL_DSN": "sluice:hunter2-db@tcp(db:3306)/sluice",
		"SLUICE_REDIS_PASSWORD": "hunter2-redis", "SLUICE_REDIS_ADDR": "r:6379"}
	err := dispatch(context.Background(), env{args: []string{"-h"}, getenv: func(k string) string { return secrets[k] },
		stdin: strings.NewReader(""), stdout: io.Discard, stderr: &out})
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	help := out.String()
	if strings.Contains(help, "hunter2") {
		t.Fatalf("-h prints a secret:\n%s", help)
	}
	for _, want := range []string{"SLUICE_MYSQL_DSN", "-listen", "-redis-db", "-startup-timeout", "Subcommands:", "create-user", "migrate"} {
		if !strings.Contains(help, want) {
			t.Errorf("-h does not mention %q:\n%s", want, help)
		}
	}
}

// TestMalformedSettingsFailAtOnce: a malformed DSN or value is a usage
// error (exit 2) naming the setting, returned before any server is
// contacted (the DSN "db" names no reachable host).
func TestMalformedSettingsFailAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"malformed dsn", map[string]string{"SLUICE_MYSQL_DSN": "root@db:3306/sluice", "SLUICE_REDIS_ADDR": "r:1"}, nil, "SLUICE_MYSQL_DSN"},
		{"no redis", map[string]string{"SLUICE_MYSQL_DSN": "u:p@tcp(db:3306)/sluice"}, nil, "SLUICE_REDIS_ADDR"},
		{"bad bool", map[string]string{"SLUICE_SECURE_COOKIES": "yes please"}, nil, "SLUICE_SECURE_COOKIES"},
		{"bad duration", nil, []string{"-startup-timeout", "soon"}, "startup-timeout"},
		{"bad db", map[string]string{"SLUICE_REDIS_DB": "first"}, nil, "SLUICE_REDIS_DB"},
		{"no password sign-in and no provider", map[string]string{"SLUICE_LOCAL_SIGNIN": "false"}, nil, "SLUICE_LOCAL_SIGNIN"},
		{"malformed group mapping", map[string]string{"SLUICE_OIDC_APP_ROLES": "admins=shop:admin"}, nil, "SLUICE_OIDC_APP_ROLES"},
		{"provider without client id", map[string]string{"SLUICE_OIDC_ISSUER": "https://idp.example.com"}, nil, "client id"},
		{"provider without callback", map[string]string{"SLUICE_OIDC_ISSUER": "https://idp.example.com", "SLUICE_OIDC_CLIENT_ID": "sluice"}, nil, "/login/sso/callback"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := dispatch(context.Background(), env{args: tc.args, getenv: func(k string) string { return tc.env[k] },
				stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard})
			var ue usageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want a usage error naming %s", err, tc.want)
			}
			if strings.Contains(err.Error(), ":p@") {
				t.Fatalf("the error shows the DSN: %v", err)
			}
		})
	}
}
