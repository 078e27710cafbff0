// Package migrations holds the database schema as golang-migrate SQL files,
// embedded so that every binary carries the schema it was built for.
//
// The SQL runs unchanged on MySQL 8, MariaDB 10.11 and the in-process engine
// of -dev mode, so it avoids anything only one of them understands.
package migrations

import (
	"database/sql"
	"embed"
	"errors"
	"fmt"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database/mysql"
	"github.com/golang-migrate/migrate/v4/source/iofs"
)

//go:embed *.sql
var files embed.FS

// open runs fn with a migrator on a pool of its own. The pool is closed
// before open returns: the migration driver pins a connection, which must not
// starve the application's pool (the -dev engine allows only one).
func open(dsn string, fn func(*migrate.Migrate) error) error {
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		return fmt.Errorf("parse mysql dsn: %w", err)
	}
	cfg.MultiStatements = true
	cfg.ParseTime = true
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return fmt.Errorf("open mysql: %w", err)
	}
	src, err := iofs.New(files, ".")
	if err != nil {
		db.Close()
		return fmt.Errorf("open embedded migrations: %w", err)
	}
	drv, err := mysql.WithInstance(db, &mysql.Config{})
	if err != nil {
		db.Close()
		return fmt.Errorf("prepare migration driver: %w", err)
	}
	m, err := migrate.NewWithInstance("iofs", src, "mysql", drv)
	if err != nil {
		db.Close()
		return fmt.Errorf("prepare migrations: %w", err)
	}
	err = fn(m)
	srcErr, dbErr := m.Close()
	return errors.Join(err, srcErr, dbErr)
}

// Up applies every migration not yet applied to the database named by dsn
// (go-sql-driver/mysql syntax). Several processes may call it at once:
// golang-migrate serialises them with a database lock.
func Up(dsn string) error {
	return open(dsn, func(m *migrate.Migrate) error {
		if err := m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
			return fmt.Errorf("apply migrations: %w", err)
		}
		return nil
	})
}

// To migrates the database named by dsn up or down to version, for tests
// of a migration against data written by the schema before it.
func To(dsn string, version uint) error {
	return open(dsn, func(m *migrate.Migrate) error {
		if err := m.Migrate(version); err != nil && !errors.Is(err, migrate.ErrNoChange) {
			return fmt.Errorf("migrate to version %d: %w", version, err)
		}
		return nil
	})
}

// Down reverts every applied migration.
func Down(dsn string) error {
	return open(dsn, func(m *migrate.Migrate) error {
		if err := m.Down(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
			return fmt.Errorf("revert migrations: %w", err)
		}
		return nil
	})
}

// Version reports the schema version and whether a migration stopped half
// way (dirty). A database without migrations reports version 0.
func Version(dsn string) (version uint, dirty bool, err error) {
	err = open(dsn, func(m *migrate.Migrate) error {
		var verr error
		version, dirty, verr = m.Version()
		if errors.Is(verr, migrate.ErrNilVersion) {
			return nil
		}
		if verr != nil {
			return fmt.Errorf("read schema version: %w", verr)
		}
		return nil
	})
	return version, dirty, err
}
