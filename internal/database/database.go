// Package database opens Sluice's MySQL connection pool and holds the few
// helpers every MySQL store shares: transactions and error translation into
// the errs vocabulary.
package database

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/sluicehq/sluice/internal/errs"
)

// Page sizes of every list a store returns.
const (
	// DefaultPageSize is the page size when a caller asks for none.
	DefaultPageSize = 50
	// MaxPageSize is the largest page; larger requests get this many.
	MaxPageSize = 500
)

// PageSize is the page size to use for a requested limit: the default for
// 0 or less, at most MaxPageSize.
func PageSize(limit int) int {
	if limit <= 0 {
		return DefaultPageSize
	}
	return min(limit, MaxPageSize)
}

// Options tune the pool. The zero value suits a real MySQL server.
type Options struct {
	// MaxOpenConns caps the pool; 0 means 25. The -dev engine needs 1.
	MaxOpenConns int
	// StatementTimeout, when positive, has the server stop a statement of
	// this pool that runs longer (rounded up to whole milliseconds), so
	// that a query a request gave up on stops in the database too: see
	// limitStatements. 0 sets no limit.
	StatementTimeout time.Duration
}

// Config parses dsn (go-sql-driver/mysql syntax) and sets what Sluice
// relies on: DATETIME columns scanned as UTC time.Time, and UTC on the
// session, so timestamps mean the same on every server.
func Config(dsn string) (*mysql.Config, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse mysql dsn: %w", err)
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	return cfg, nil
}

// Open opens a pool on dsn and checks that the server answers.
func Open(ctx context.Context, dsn string, opts Options) (*sqlx.DB, error) {
	cfg, err := Config(dsn)
	if err != nil {
		return nil, err
	}
	var connector driver.Connector
	connector, err = mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("open mysql: %w", err)
	}
	if opts.StatementTimeout > 0 {
		connector = limitedConnector{Connector: connector, limit: opts.StatementTimeout}
	}
	db := sqlx.NewDb(sql.OpenDB(connector), "mysql")
	n := opts.MaxOpenConns
	if n == 0 {
		n = 25
	}
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	db.SetConnMaxLifetime(5 * time.Minute)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("connect to mysql %s: %w", cfg.Addr, Translate(err))
	}
	return db, nil
}

// Tx is a transaction InTx runs: the statements of *sqlx.Tx, the time
// the transaction began (Now, the one timestamp of every row it writes)
// and the functions to run once it has committed. It lives only as long
// as InTx's fn; the zero value is not usable.
type Tx struct {
	*sqlx.Tx
	now   time.Time
	hooks []func()
}

// Now is the time the transaction began, as the database.Now of that
// moment: every row written in it can carry the same time.
func (tx *Tx) Now() time.Time { return tx.now }

// AfterCommit arranges for fn to run once tx has committed, before InTx
// returns; it never runs if tx rolls back or its commit fails. Work that
// must only follow committed state (in-memory copies of stored data)
// belongs here. Only fn's goroutine may call it.
func (tx *Tx) AfterCommit(fn func()) { tx.hooks = append(tx.hooks, fn) }

// InTx runs fn in a transaction, committing when fn returns nil and rolling
// back otherwise. Functions registered with tx.AfterCommit run once the
// commit succeeded, before InTx returns.
func InTx(ctx context.Context, db *sqlx.DB, fn func(tx *Tx) error) error {
	stx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", Translate(err))
	}
	tx := &Tx{Tx: stx, now: Now()}
	if err := fn(tx); err != nil {
		_ = stx.Rollback()
		return err
	}
	if err := stx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", Translate(err))
	}
	for _, f := range tx.hooks {
		f()
	}
	return nil
}

// MySQL error numbers Sluice reacts to.
const (
	errDuplicateEntry   = 1062
	errLockDeadlock     = 1213
	errLockWaitTimeout  = 1205
	errRowIsReferenced  = 1451
	errRowIsReferenced2 = 1217
	errNoReferencedRow  = 1216
	errNoReferencedRow2 = 1452
	errTooManyConns     = 1040
	errServerShutdown   = 1053
	errConnKilled       = 1927 // MariaDB: the server is killing connections
)

// IsDuplicate reports whether err is a unique-key violation.
func IsDuplicate(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == errDuplicateEntry
}

// IsReferenced reports whether err is a foreign-key violation on delete.
func IsReferenced(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == errRowIsReferenced || me.Number == errRowIsReferenced2)
}

// IsMissingParent reports whether err is a foreign-key violation on insert
// or update: the row refers to one that does not exist.
func IsMissingParent(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == errNoReferencedRow || me.Number == errNoReferencedRow2)
}

// Translate wraps errors that mean "the database cannot be reached right
// now" with errs.ErrUnavailable, so that callers answer 503 rather than 500.
// Other errors come back unchanged.
func Translate(err error) error {
	if err == nil || errors.Is(err, errs.ErrUnavailable) {
		return err
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case errLockDeadlock, errLockWaitTimeout, errTooManyConns, errServerShutdown, errConnKilled:
			return fmt.Errorf("%w: %w", errs.ErrUnavailable, err)
		}
		return err
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, sql.ErrConnDone) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, driver.ErrBadConn) {
		return fmt.Errorf("%w: %w", errs.ErrUnavailable, err)
	}
	return err
}

// Now is the current time as the DATETIME(6) columns keep it: UTC, to the
// microsecond, so that a value written and read back compares equal.
func Now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// Insert runs query, an INSERT of one row, and returns the id the server
// gave the row. Its error is translated; IsDuplicate and IsReferenced
// still see the server's.
func Insert(ctx context.Context, ex sqlx.ExecerContext, query string, args ...any) (int64, error) {
	return execResult(ctx, ex, sql.Result.LastInsertId, query, args...)
}

// ExecCount runs query and returns how many rows it changed. Its error is
// translated.
func ExecCount(ctx context.Context, ex sqlx.ExecerContext, query string, args ...any) (int64, error) {
	return execResult(ctx, ex, sql.Result.RowsAffected, query, args...)
}

// execResult runs query and returns the number read reads of its result.
func execResult(ctx context.Context, ex sqlx.ExecerContext, read func(sql.Result) (int64, error), query string, args ...any) (int64, error) {
	res, err := ex.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, Translate(err)
	}
	n, err := read(res)
	if err != nil {
		return 0, Translate(err)
	}
	return n, nil
}

// Where joins conds with AND into a WHERE clause (with a leading space),
// or "" when there are none.
func Where(conds []string) string {
	if len(conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(conds, " AND ")
}

// Count runs query, a SELECT COUNT(*) whose slice arguments each fill an
// IN (?), and returns the count. The query's error is translated.
func Count(ctx context.Context, q sqlx.QueryerContext, query string, args ...any) (int, error) {
	query, args, err := sqlx.In(query, args...)
	if err != nil {
		return 0, err
	}
	var n int
	if err := sqlx.GetContext(ctx, q, &n, query, args...); err != nil {
		return 0, Translate(err)
	}
	return n, nil
}

// SelectAll runs query, scans each row it returns as a Row and converts
// it with convert: stores scan flat row types and build domain values
// from them. The query's error is translated.
func SelectAll[Row, T any](ctx context.Context, q sqlx.QueryerContext, convert func(*Row) (T, error), query string, args ...any) ([]T, error) {
	var rows []Row
	if err := sqlx.SelectContext(ctx, q, &rows, query, args...); err != nil {
		return nil, Translate(err)
	}
	out := make([]T, 0, len(rows))
	for i := range rows {
		v, err := convert(&rows[i])
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// Stamp is what every versioned, audited record carries, and the columns
// its table ends with: the version optimistic locking compares, and who
// created and last changed the record, and when. Domain types and row
// types embed it; JSON carries its fields flat.
type Stamp struct {
	// Version counts the saved changes of the record, from 1. Updates and
	// deletes that name a stale version are refused.
	Version   int64     `db:"version" json:"version"`
	CreatedBy string    `db:"created_by" json:"created_by"`
	UpdatedBy string    `db:"updated_by" json:"updated_by"`
	CreatedAt time.Time `db:"created_at" json:"created_at"`
	UpdatedAt time.Time `db:"updated_at" json:"updated_at"`
}

// NewStamp is the stamp of a record that user creates now: version 1.
func NewStamp(user string) Stamp {
	now := Now()
	return Stamp{Version: 1, CreatedBy: user, UpdatedBy: user, CreatedAt: now, UpdatedAt: now}
}

// Next is the stamp after user changes the record now: one version higher.
func (s Stamp) Next(user string) Stamp {
	s.Version++
	s.UpdatedBy, s.UpdatedAt = user, Now()
	return s
}

// limitedConnector sets a statement time limit on each new connection.
type limitedConnector struct {
	driver.Connector
	limit time.Duration
}

func (c limitedConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	limitStatements(ctx, conn, c.limit)
	return conn, nil
}

// limitStatements sets the session's statement time limit: MariaDB's
// max_statement_time (seconds, every statement), else MySQL 8's
// max_execution_time (milliseconds, SELECT statements), the variable the
// other server does not know. An engine that knows neither (the embedded
// -dev engine) keeps no limit: the errors are ignored, the connection is
// used as is.
func limitStatements(ctx context.Context, conn driver.Conn, limit time.Duration) {
	ex, ok := conn.(driver.ExecerContext)
	if !ok {
		return
	}
	ms := (limit + time.Millisecond - 1).Milliseconds()
	if _, err := ex.ExecContext(ctx, fmt.Sprintf("SET SESSION max_statement_time = %d.%03d", ms/1000, ms%1000), nil); err == nil {
		return
	}
	_, _ = ex.ExecContext(ctx, fmt.Sprintf("SET SESSION max_execution_time = %d", ms), nil)
}
