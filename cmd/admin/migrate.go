package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/migrations"
)

// migrate is `migrate up|down|version`.
func migrate(_ context.Context, e env) error {
	fs := newFlags(e, "migrate", "migrate [-mysql-dsn DSN] up|down|version")
	dsn := fs.String("mysql-dsn", e.getenv("SLUICE_MYSQL_DSN"), "MySQL `DSN` (env SLUICE_MYSQL_DSN)")
	if err := fs.Parse(e.args); err != nil {
		return flagError(err)
	}
	if fs.NArg() != 1 {
		return usagef("migrate needs one of up, down or version")
	}
	if strings.TrimSpace(*dsn) == "" {
		return usagef("mysql is not configured: set SLUICE_MYSQL_DSN or -mysql-dsn")
	}
	switch fs.Arg(0) {
	case "up":
		if err := migrations.Up(*dsn); err != nil {
			return err
		}
		fmt.Fprintln(e.stdout, "schema is up to date")
	case "down":
		if err := migrations.Down(*dsn); err != nil {
			return err
		}
		fmt.Fprintln(e.stdout, "every migration reverted")
	case "version":
		v, dirty, err := migrations.Version(*dsn)
		if err != nil {
			return err
		}
		if dirty {
			fmt.Fprintf(e.stdout, "%d (dirty: a migration stopped half way; fix it by hand)\n", v)
		} else {
			fmt.Fprintln(e.stdout, v)
		}
	default:
		return usagef("unknown migrate command %q: want up, down or version", fs.Arg(0))
	}
	return nil
}
