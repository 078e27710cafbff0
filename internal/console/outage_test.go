package console

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/testenv"
)

var versionField = regexp.MustCompile(`name="version" value="(\d+)"`)

// TestMySQLOutageUnderLoad is BRIEF Q8: a private MariaDB is killed for
// 10 s while people browse and edit. Every answer is a page: 503 with a
// message while the database is away, never a 500; and every edit the
// console acknowledged is in the database afterwards.
func TestMySQLOutageUnderLoad(t *testing.T) {
	// The driver logs every connection it loses; that is the point here.
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
	maria := testenv.StartMariaDB(t)
	dsn := maria.FreshDatabase(t)
	db, err := database.Open(context.Background(), dsn, database.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	e := newEnvOn(t, db)
	olga := e.user("olga", false)
	e.app("alpha", "olga")

	const workers = 4
	var (
		stop     atomic.Bool
		mu       sync.Mutex
		statuses = map[int]int{}
		acked    = map[string][]string{} // bucket -> acknowledged descriptions, in order
		bad      []string
	)
	note := func(r response, what string) {
		mu.Lock()
		defer mu.Unlock()
		statuses[r.status]++
		switch {
		case r.status >= 500 && r.status != http.StatusServiceUnavailable:
			bad = append(bad, fmt.Sprintf("%s: %d %s", what, r.status, excerpt(r.body)))
		case r.status == http.StatusServiceUnavailable && !strings.Contains(r.body, "cannot reach its database"):
			bad = append(bad, what+": 503 without the friendly message")
		case strings.Contains(r.body, "goroutine ") || strings.Contains(r.body, ".go:"):
			bad = append(bad, what+": a stack trace reached the page")
		}
	}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		name := fmt.Sprintf("load-%d", w)
		e.bucket(name, "alpha")
		b := e.browser()
		b.signIn(olga)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				note(b.get("/buckets"), "list")
				r := b.get("/buckets/" + name + "/edit")
				note(r, "edit form")
				m := versionField.FindStringSubmatch(r.body)
				if r.status != http.StatusOK || m == nil {
					time.Sleep(50 * time.Millisecond)
					continue
				}
				desc := fmt.Sprintf("edit %d of %s", i, name)
				r = b.post("/buckets/"+name, url.Values{"max_permits": {"10"}, "rate": {"100/min"},
					"allowed_apps": {"alpha"}, "description": {desc}, "version": {m[1]}})
				note(r, "save")
				if r.status == http.StatusSeeOther {
					mu.Lock()
					acked[name] = append(acked[name], desc)
					mu.Unlock()
				}
			}
		}()
	}

	time.Sleep(1500 * time.Millisecond)
	maria.Kill()
	down := time.Now()
	time.Sleep(10 * time.Second)
	maria.Start()
	t.Logf("mysql was down %v", time.Since(down).Round(100*time.Millisecond))
	time.Sleep(3 * time.Second) // the console recovers by itself
	stop.Store(true)
	wg.Wait()

	t.Logf("answers by status: %v", statuses)
	for _, b := range bad {
		t.Error(b)
	}
	if statuses[http.StatusServiceUnavailable] == 0 {
		t.Error("no 503 while MySQL was down")
	}
	if statuses[http.StatusSeeOther] == 0 {
		t.Fatal("no edit was acknowledged at all")
	}
	// Every acknowledged edit is stored: its audit row commits in the same
	// transaction as the change, and the newest one is the bucket's value
	// (or a later, unacknowledged attempt that committed anyway).
	ctx := context.Background()
	total := 0
	for name, descs := range acked {
		for _, d := range descs {
			var n int
			if err := db.GetContext(ctx, &n, `SELECT COUNT(*) FROM audit_log WHERE action = 'bucket.update'
				AND object_name = ? AND after_json LIKE ?`, name, `%"`+d+`"%`); err != nil {
				t.Fatal(err)
			}
			if n != 1 {
				t.Errorf("acknowledged edit %q of %s is stored %d times", d, name, n)
			}
			total++
		}
		b, err := e.bkts.Get(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		last := descs[len(descs)-1]
		var lastN, curN int
		fmt.Sscanf(strings.TrimPrefix(last, "edit "), "%d", &lastN)
		fmt.Sscanf(strings.TrimPrefix(b.Description, "edit "), "%d", &curN)
		if curN < lastN {
			t.Errorf("%s holds %q, older than the acknowledged %q", name, b.Description, last)
		}
	}
	t.Logf("%d acknowledged edits verified", total)
}
