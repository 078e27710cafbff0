package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluicehq/sluice/internal/database"
	redistest "github.com/sluicehq/sluice/internal/redisscript/testenv"
)

// MariaDBServer is a private mariadbd with its own data directory.
type MariaDBServer struct {
	*Process
	t    testing.TB
	Port int
	// RootDSN connects as root without a database.
	RootDSN string
}

// StartMariaDB initialises a data directory and starts a private mariadbd,
// stopped when t ends. It takes a few seconds; use the shared server
// (MySQL, MySQLDSN) unless the test must stop the database.
func StartMariaDB(t testing.TB) *MariaDBServer {
	t.Helper()
	install := LookPath(t, "mariadb-install-db")
	server := LookPath(t, "mariadbd")
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	// A private tmpdir: servers bootstrapping at once must not share
	// /tmp's temporary tables.
	tmp := filepath.Join(dir, "tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	user := "root"
	if os.Geteuid() != 0 {
		user = os.Getenv("USER")
	}
	out, err := exec.Command(install, "--no-defaults", "--datadir="+data, "--auth-root-authentication-method=normal",
		"--skip-test-db", "--user="+user, "--tmpdir="+tmp).CombinedOutput()
	if err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	port := FreePort(t)
	args := []string{"--no-defaults", "--datadir=" + data, "--tmpdir=" + tmp, "--socket=" + filepath.Join(dir, "sock"),
		"--pid-file=" + filepath.Join(dir, "pid"), "--bind-address=127.0.0.1", "--port=" + strconv.Itoa(port),
		"--user=" + user, "--skip-log-bin", "--innodb-buffer-pool-size=64M", "--innodb-flush-log-at-trx-commit=2",
		"--character-set-server=utf8mb4", "--collation-server=utf8mb4_unicode_ci"}
	cfg := mysql.NewConfig()
	cfg.User = "root"
	cfg.Net = "tcp"
	cfg.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	s := &MariaDBServer{t: t, Process: redistest.NewProcess(t, "mariadb-"+strconv.Itoa(port), server, dir, args), Port: port,
		RootDSN: cfg.FormatDSN()}
	s.Start()
	return s
}

// Start starts the server (again) and waits until it accepts connections.
func (s *MariaDBServer) Start() {
	s.t.Helper()
	s.Process.Start()
	ok := redistest.WaitFor(30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		db, err := database.Open(ctx, s.RootDSN, database.Options{MaxOpenConns: 1})
		if err != nil {
			return false
		}
		db.Close()
		return true
	})
	if !ok {
		s.t.Fatalf("mariadbd on port %d did not start: %s", s.Port, s.Log())
	}
}

// FreshDatabase creates a migrated database on this server and returns its DSN.
func (s *MariaDBServer) FreshDatabase(t testing.TB) string {
	t.Helper()
	return freshDatabase(t, s.RootDSN)
}

// String names the server in test output.
func (s *MariaDBServer) String() string { return fmt.Sprintf("mariadbd on port %d", s.Port) }
