package main

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/internal/startup"
	"github.com/sluicehq/sluice/migrations"
)

// migrate is `migrate up|down|version`.
func migrate(_ context.Context, e env) error {
	var dsn string
	s := newSettings(e, "migrate", "migrate [-mysql-dsn DSN] up|down|version")
	s.Secret(&dsn, "mysql-dsn", "SLUICE_MYSQL_DSN", "MySQL DSN")
	if err := s.Parse(e.args); err != nil {
		return err
	}
	if len(s.Args()) != 1 {
		return usagef("migrate needs one of up, down or version")
	}
	if err := startup.CheckDSN(dsn); err != nil {
		return err
	}
	switch s.Args()[0] {
	case "up":
		if err := migrations.Up(dsn); err != nil {
			return err
		}
		fmt.Fprintln(e.stdout, "schema is up to date")
	case "down":
		if err := migrations.Down(dsn); err != nil {
			return err
		}
		fmt.Fprintln(e.stdout, "every migration reverted")
	case "version":
		v, dirty, err := migrations.Version(dsn)
		if err != nil {
			return err
		}
		if dirty {
			fmt.Fprintf(e.stdout, "%d (dirty: a migration stopped half way; fix it by hand)\n", v)
		} else {
			fmt.Fprintln(e.stdout, v)
		}
	default:
		return usagef("unknown migrate command %q: want up, down or version", s.Args()[0])
	}
	return nil
}

// migrateIf is the migration startup.Open applies: migrations.Up when on
// is set, none otherwise.
func migrateIf(on bool) func(dsn string) error {
	if on {
		return migrations.Up
	}
	return nil
}
