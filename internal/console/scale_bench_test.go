package console

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/testenv"
)

// BenchmarkPagesAtScale times the console's pages and the JSON API's
// lists on MariaDB holding 10,000 buckets over 50 apps and 1,000,000 audit
// rows, as an admin and as a user who owns 5 apps and views 5 others, and
// reports each page's p50 and p99 (ms) over the
// requests made (the goal is a p99 of at most 50 ms), and the rows and
// index entries MariaDB read for one request (db-reads: its handler read
// counters, which the load of a shared machine does not change). The data is seeded
// with INSERT ... SELECT in a few seconds, only when benchmarks run (-bench):
// `go test` alone never runs it. docs/benchmarks.md has the command and the
// figures.
func BenchmarkPagesAtScale(b *testing.B) {
	ctx := context.Background()
	// The console's pool as cmd/admin opens it: a statement runs no longer
	// than the request that sent it (the test router's 3 s), so a request
	// that timed out does not leave its query running under the next ones.
	// The seed runs on a pool of its own, without the limit.
	dsn := testenv.MySQLDSN(b)
	db, err := database.Open(ctx, dsn, database.Options{StatementTimeout: testRequestTimeout})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	seedDB, err := database.Open(ctx, dsn, database.Options{MaxOpenConns: 1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { seedDB.Close() })
	e := newEnvOn(b, db, func(s *setup) { s.api = true })
	admin := e.browser()
	adaUser := e.user("ada", true)
	admin.signIn(adaUser)
	olgaUser := e.user("olga", false)
	start := time.Now()
	seedScale(b, seedDB)
	for _, app := range []string{"app03", "app07", "app11", "app42", "app49"} {
		e.grant("olga", app, "viewer")
	}
	for _, app := range []string{"app01", "app05", "app13", "app21", "app33"} {
		e.grant("olga", app, "owner")
	}
	adaToken := e.apiToken("ada")
	olgaToken := e.apiToken("olga")
	b.Logf("seeded 10,000 buckets and 1,000,000 audit rows in %v", time.Since(start).Round(time.Millisecond))
	if _, err := seedDB.ExecContext(ctx, `ANALYZE TABLE audit_log, buckets, bucket_usage`); err != nil {
		b.Fatal(err)
	}
	olga := e.browser()
	olga.signIn(olgaUser)
	// A second console on a pool of one connection, so that a request's
	// statements all run in one session whose counters can be read.
	probeDB, err := database.Open(ctx, dsn, database.Options{MaxOpenConns: 1, StatementTimeout: testRequestTimeout})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { probeDB.Close() })
	pe := newEnvOn(b, probeDB, func(s *setup) { s.api = true })
	probeAs := map[*browser]*browser{admin: pe.browser(), olga: pe.browser()}
	probeAs[admin].signIn(adaUser)
	probeAs[olga].signIn(olgaUser)
	// The plan of the member's overview query (usage.Recents.TopDeniedOf):
	// a walk of bucket_usage_denied, stopped at 25 visible rows.
	var plan []struct {
		ID           *int64  `db:"id"`
		SelectType   *string `db:"select_type"`
		Table        *string `db:"table"`
		Type         *string `db:"type"`
		PossibleKeys *string `db:"possible_keys"`
		Key          *string `db:"key"`
		KeyLen       *string `db:"key_len"`
		Ref          *string `db:"ref"`
		Rows         *string `db:"rows"`
		Extra        *string `db:"Extra"`
	}
	if err := e.db.SelectContext(ctx, &plan, `EXPLAIN SELECT u.bucket_name FROM bucket_usage u JOIN buckets b ON b.name = u.bucket_name
		JOIN apps o ON o.id = b.owner_app_id WHERE u.denied_total > 0 AND (o.name IN ('app01','app03') OR EXISTS (SELECT 1 FROM bucket_apps ba
		JOIN apps a ON a.id = ba.app_id WHERE ba.bucket_id = b.id AND a.name IN ('app01','app03')))
		ORDER BY u.denied_total DESC, u.bucket_name DESC LIMIT 25`); err != nil {
		b.Fatal(err)
	}
	for _, p := range plan {
		str := func(s *string) string {
			if s == nil {
				return "NULL"
			}
			return *s
		}
		b.Logf("overview plan: %s %s type=%s key=%s ref=%s rows=%v %s", str(p.SelectType), str(p.Table), str(p.Type), str(p.Key), str(p.Ref), str(p.Rows), str(p.Extra))
	}

	// A cursor deep in the log, for an older page.
	var mid int64
	if err := e.db.GetContext(ctx, &mid, `SELECT MAX(id) - 500000 FROM audit_log`); err != nil {
		b.Fatal(err)
	}
	pages := []struct {
		name  string
		as    *browser
		path  string
		token string // the API's pages: sent as a bearer token
	}{
		{"overview", admin, "/usage", ""},
		{"overview-member", olga, "/usage", ""},
		{"bucket-detail-day", admin, "/buckets/b-04242?window=day", ""},
		{"bucket-detail-member", olga, "/buckets/b-04201", ""},
		{"apps-member", olga, "/apps", ""},
		{"app-member", olga, "/apps/app01", ""},
		{"api-buckets", admin, "/api/v1/buckets?limit=500", adaToken},
		{"api-buckets-member", olga, "/api/v1/buckets?limit=500", olgaToken},
		{"api-apps-member", olga, "/api/v1/apps", olgaToken},
		{"api-audit-500", admin, "/api/v1/audit?limit=500", adaToken},
		{"api-audit-500-member", olga, "/api/v1/audit?limit=500", olgaToken},
		{"api-audit-bucket-part-member", olga, "/api/v1/audit?bucket=b-0424", olgaToken},
		{"buckets", admin, "/buckets", ""},
		{"buckets-most-denied", admin, "/buckets?sort=denied", ""},
		{"buckets-member", olga, "/buckets", ""},
		{"bucket-detail", admin, "/buckets/b-04242", ""},
		{"audit-first", admin, "/audit", ""},
		{"audit-member", olga, "/audit", ""},
		{"audit-older-page", admin, "/audit?before=" + strconv.FormatInt(mid, 10), ""},
		{"audit-newer-page", admin, "/audit?after=" + strconv.FormatInt(mid, 10), ""},
		{"audit-app", admin, "/audit?app=app07", ""},
		{"audit-bucket-part", admin, "/audit?bucket=b-0424", ""},
		{"audit-bucket-many", admin, "/audit?bucket=b-0", ""},
		{"audit-bucket-member", olga, "/audit?bucket=b-0424", ""},
		{"audit-bucket-many-member", olga, "/audit?bucket=b-00", ""},
		{"audit-older-page-member", olga, "/audit?before=" + strconv.FormatInt(mid, 10), ""},
		{"audit-app-member", olga, "/audit?app=app07", ""},
		{"buckets-most-denied-member", olga, "/buckets?sort=denied", ""},
		{"api-audit-500-older-member", olga, "/api/v1/audit?limit=500&cursor=" + auditCursor(mid), olgaToken},
	}
	// Each page once on the probe console, untimed, for its reads and
	// statements, and once on the timed one: this warms every page's data
	// and the pools' connections before any page is timed (the first page
	// timed used to open the timed pool's connections within its p99).
	type probe struct{ reads, statements int64 }
	probes := map[string]probe{}
	for _, p := range pages {
		reads, statements := dbReads(b, probeDB, func() {
			if p.token != "" {
				pe.apiGet(b, p.path, p.token)
			} else {
				probeAs[p.as].get(p.path)
			}
		})
		probes[p.name] = probe{reads, statements}
		// And on the timed console, whose pool opens its connections
		// here rather than in the first page's timed requests.
		if p.token != "" {
			e.apiGet(b, p.path, p.token)
		} else {
			p.as.get(p.path)
		}
	}
	for _, p := range pages {
		b.Run(p.name, func(b *testing.B) {
			reads, statements := probes[p.name].reads, probes[p.name].statements
			var took []time.Duration
			failed := 0
			for b.Loop() {
				t0 := time.Now()
				status := 0
				if p.token != "" {
					status = e.apiGet(b, p.path, p.token)
				} else {
					status = p.as.get(p.path).status
				}
				if status != http.StatusOK {
					// A request past the test router's 3 s timeout (503)
					// counts, as a failure, rather than stopping the run.
					failed++
				}
				took = append(took, time.Since(t0))
			}
			slices.Sort(took)
			at := func(q float64) float64 {
				return float64(took[min(len(took)-1, int(q*float64(len(took))))].Microseconds()) / 1000
			}
			b.ReportMetric(at(0.50), "p50-ms")
			b.ReportMetric(at(0.99), "p99-ms")
			b.ReportMetric(float64(failed), "failed")
			b.ReportMetric(float64(reads), "db-reads")
			b.ReportMetric(float64(statements), "db-statements")
		})
	}
}

// seedScale fills e's database: 50 apps, 10,000 buckets (b-00000 ..
// b-09999, bucket i owned by app i mod 50) with an hour of usage each,
// and 1,000,000 audit rows over the last 12 days, a third of them bucket
// updates with before and after snapshots.
func seedScale(b *testing.B, db *sqlx.DB) {
	b.Helper()
	ctx := context.Background()
	minute := time.Now().Unix() / 60
	for _, q := range []string{
		`INSERT INTO apps (name, created_by, created_at, updated_by, updated_at)
			SELECT CONCAT('app', LPAD(seq, 2, '0')), 'bench', NOW(6), 'bench', NOW(6) FROM seq_0_to_49`,
		`INSERT INTO buckets (name, owner_app_id, max_permits, rate_permits, rate_period_seconds, created_by, created_at, updated_by, updated_at)
			SELECT CONCAT('b-', LPAD(s.seq, 5, '0')), a.id, 100, 10, 1, 'bench', NOW(6), 'bench', NOW(6)
			FROM seq_0_to_9999 s JOIN apps a ON a.name = CONCAT('app', LPAD(s.seq % 50, 2, '0'))`,
		`INSERT INTO bucket_apps (bucket_id, app_id) SELECT id, owner_app_id FROM buckets`,
		`INSERT INTO bucket_usage (bucket_name, last_minute, allowed_counts, denied_counts, allowed_total, denied_total)
			SELECT name, ` + strconv.FormatInt(minute, 10) + `, CONCAT(REPEAT('50,', 59), '50'),
				CONCAT(REPEAT(CONCAT(id % 7, ','), 59), id % 7), 3000, 60 * (id % 7) FROM buckets`,
		`INSERT INTO audit_log (at, actor, actor_user, action, object_type, object_name, app, before_json, after_json, detail)
			SELECT NOW(6) - INTERVAL seq SECOND, CONCAT('user', seq % 300), CONCAT('user', seq % 300),
				ELT(1 + seq % 3, 'bucket.update', 'bucket.create', 'access.denied'),
				'bucket', CONCAT('b-', LPAD(seq % 10000, 5, '0')), CONCAT('app', LPAD(seq % 10000 % 50, 2, '0')),
				IF(seq % 3 = 0, CONCAT('{"name":"b-', LPAD(seq % 10000, 5, '0'), '","max_permits":100,"rate":"10/s","allowed_apps":["app', LPAD(seq % 50, 2, '0'), '"]}'), NULL),
				IF(seq % 3 = 0, CONCAT('{"name":"b-', LPAD(seq % 10000, 5, '0'), '","max_permits":', 100 + seq % 5, ',"rate":"10/s","allowed_apps":["app', LPAD(seq % 50, 2, '0'), '"]}'), NULL),
				''
			FROM seq_1_to_1000000`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			b.Fatalf("seed: %v", err)
		}
	}
}

// dbReads runs request and returns how many rows and index entries
// MariaDB read for it (the sum of the handler read counters) and how many
// statements it sent, on db, a pool of one connection that request's
// statements all run on. Each statement is a round trip, which on a loaded
// machine waits for the scheduler twice.
func dbReads(b *testing.B, db *sqlx.DB, request func()) (reads, statements int64) {
	b.Helper()
	ctx := context.Background()
	read := func() (n, q int64) {
		var rows []struct {
			Name  string `db:"Variable_name"`
			Value int64  `db:"Value"`
		}
		if err := db.SelectContext(ctx, &rows, `SHOW SESSION STATUS WHERE Variable_name LIKE 'Handler_read%' OR Variable_name = 'Questions'`); err != nil {
			b.Fatal(err)
		}
		for _, r := range rows {
			if r.Name == "Questions" {
				q = r.Value
			} else {
				n += r.Value
			}
		}
		return n, q
	}
	before, qBefore := read()
	request()
	// The reads and statement of SHOW STATUS itself: one more, measured.
	after, qAfter := read()
	again, qAgain := read()
	return after - before - (again - after), qAfter - qBefore - (qAgain - qAfter)
}

// apiToken creates a personal API token for user.
func (e *env) apiToken(user string) string {
	e.t.Helper()
	u, err := e.acc.UserByName(context.Background(), user)
	if err != nil {
		e.t.Fatalf("user %s: %v", user, err)
	}
	tok, _, err := e.acc.CreateToken(context.Background(), e.system, u.ID, "bench", nil)
	if err != nil {
		e.t.Fatalf("token of %s: %v", user, err)
	}
	return tok
}

// apiGet sends GET path to the API with token and returns the status,
// having read the whole body.
func (e *env) apiGet(b *testing.B, path, token string) int {
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// auditCursor is the JSON API's cursor of the audit page older than id.
func auditCursor(id int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte("audit:" + strconv.FormatInt(id, 10)))
}
