// Package devdb runs an in-memory MySQL-compatible server inside the
// process, for -dev mode and tests that need no real MySQL. Data lives only
// as long as the process.
//
// The engine does not isolate concurrent writers the way InnoDB does, so
// clients must use a single connection (database.Options{MaxOpenConns: 1})
// and run migrations before opening their pool.
package devdb

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"

	sqle "github.com/dolthub/go-mysql-server"
	"github.com/dolthub/go-mysql-server/memory"
	"github.com/dolthub/go-mysql-server/server"
	"github.com/dolthub/go-mysql-server/sql"
	"github.com/sirupsen/logrus"
)

// Database is the name of the database the server holds.
const Database = "sluice"

// Start serves an empty database named Database on a free loopback port and
// returns its DSN (go-sql-driver/mysql syntax, user root without a
// password) and a function that stops the server. ctx bounds the start-up
// only.
func Start(ctx context.Context) (dsn string, stop func(), err error) {
	if err := ctx.Err(); err != nil {
		return "", nil, err
	}
	// The engine logs every connection, and warns about file privileges that
	// do not apply to an in-memory database; -dev output should
	// show Sluice's own log.
	logrus.SetLevel(logrus.ErrorLevel)

	db := memory.NewDatabase(Database)
	db.BaseDatabase.EnablePrimaryKeyIndexes()
	provider := memory.NewDBProvider(db)
	engine := sqle.NewDefault(provider)

	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("listen on loopback: %w", err)
	}
	srv, err := server.NewServer(server.Config{Protocol: "tcp", Listener: ln},
		engine, sql.NewContext, memory.NewSessionBuilder(provider), nil)
	if err != nil {
		ln.Close()
		return "", nil, fmt.Errorf("start embedded mysql: %w", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Start() // returns when the server is closed
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			if err := srv.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
				logrus.WithError(err).Warn("stop embedded mysql")
			}
			<-done
		})
	}
	return fmt.Sprintf("root@tcp(%s)/%s", ln.Addr().String(), Database), stop, nil
}
