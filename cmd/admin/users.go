package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/sluicehq/sluice/internal/accounts"
	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/manage"
	"github.com/sluicehq/sluice/internal/rbac"
	"github.com/sluicehq/sluice/internal/settings"
	"github.com/sluicehq/sluice/internal/startup"
	"github.com/sluicehq/sluice/migrations"
)

// cliActor is the author the audit log records for command-line changes.
var cliActor = audit.Actor{User: "system", Via: "cli"}

// userFlags are the flags create-user and set-password share.
type userFlags struct {
	dsn           string
	username      string
	passwordStdin bool
}

func parseUserFlags(e env, name string, extra func(*settings.Set)) (userFlags, error) {
	var f userFlags
	s := newSettings(e, name, name+" -username NAME -password-stdin")
	s.Secret(&f.dsn, "mysql-dsn", "SLUICE_MYSQL_DSN", "MySQL DSN")
	s.String(&f.username, "username", "", "the user's name")
	s.Bool(&f.passwordStdin, "password-stdin", "", "read the password from the first line of standard input")
	if extra != nil {
		extra(s)
	}
	if err := s.Parse(e.args); err != nil {
		return f, err
	}
	if err := s.NoArgs(); err != nil {
		return f, err
	}
	if err := startup.CheckDSN(f.dsn); err != nil {
		return f, err
	}
	switch {
	case f.username == "":
		return f, usagef("-username is required")
	case !f.passwordStdin:
		// Passwords on the command line end up in shell history and ps.
		return f, usagef("-password-stdin is required: pass the password on standard input, never as an argument")
	}
	return f, nil
}

// readPassword reads the first line of r, without its line ending.
func readPassword(r io.Reader) (string, error) {
	line, err := bufio.NewReader(io.LimitReader(r, 4096)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read password from standard input: %w", err)
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", usagef("no password on standard input")
	}
	return line, nil
}

// openDB opens the database and brings its schema up to date, so that
// create-user works on a fresh database before the console ever ran.
func openDB(ctx context.Context, dsn string) (*sqlx.DB, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	db, err := database.Open(ctx, dsn, database.Options{MaxOpenConns: 2})
	if err != nil {
		return nil, err
	}
	if err := migrations.Up(dsn); err != nil {
		db.Close()
		return nil, fmt.Errorf("migrate database: %w", err)
	}
	return db, nil
}

// userCommand parses a user subcommand's settings, reads the password
// from standard input and opens the database; the caller closes it.
func userCommand(ctx context.Context, e env, name string, extra func(*settings.Set)) (userFlags, string, *sqlx.DB, error) {
	f, err := parseUserFlags(e, name, extra)
	if err != nil {
		return f, "", nil, err
	}
	password, err := readPassword(e.stdin)
	if err != nil {
		return f, "", nil, err
	}
	db, err := openDB(ctx, f.dsn)
	return f, password, db, err
}

// createUser is `create-user -username NAME -password-stdin [-admin]`,
// which bootstraps the first admin.
func createUser(ctx context.Context, e env) error {
	var admin bool
	f, password, db, err := userCommand(ctx, e, "create-user", func(s *settings.Set) {
		s.Bool(&admin, "admin", "", "make the user an administrator")
	})
	if err != nil {
		return err
	}
	defer db.Close()
	// The console's use case: the same rules, refusals and audit rows.
	enf, err := rbac.New(ctx, db)
	if err != nil {
		return err
	}
	svc, err := manage.New(manage.Config{DB: db, Enforcer: enf, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer svc.Close()
	if _, err := svc.CreateUser(ctx, manage.Operator, manage.CreateUser{Username: f.username, Password: password, Admin: admin}); err != nil {
		return explain(err)
	}
	role := "user"
	if admin {
		role = "admin"
	}
	fmt.Fprintf(e.stdout, "created %s %q\n", role, f.username)
	return nil
}

// setPassword is `set-password -username NAME -password-stdin`; it also
// ends the user's sessions.
func setPassword(ctx context.Context, e env) error {
	f, password, db, err := userCommand(ctx, e, "set-password", nil)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := accounts.NewStore(db).SetPassword(ctx, cliActor, f.username, password); err != nil {
		return explain(err)
	}
	fmt.Fprintf(e.stdout, "password of %q changed; their sessions have ended\n", f.username)
	return nil
}

// explain turns store errors into messages for the command line: field
// errors become usage errors naming the field.
func explain(err error) error {
	if v := errs.Fields(err); v != nil {
		var parts []string
		for _, fe := range v.Fields {
			parts = append(parts, fe.Field+" "+fe.Reason)
		}
		return usagef("%s", strings.Join(parts, "; "))
	}
	if errors.Is(err, errs.ErrNotFound) {
		return fmt.Errorf("no such user: %w", err)
	}
	return err
}
