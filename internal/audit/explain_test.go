package audit

import (
	"context"
	"github.com/sluicehq/sluice/internal/database"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

// TestFiltersUseIndexes fills the log with 200,000 rows over 100 apps and
// checks with EXPLAIN that every filter the pages offer reads an index in
// id order: no full scan and no sort, so a page costs the same at ten
// million rows. Non-admins' lists run one query per visible app (App set),
// which is what is explained for them here. SLUICE_AUDIT_ROWS=10000000
// runs it at that size (minutes of inserts), logging how long pages take.
func TestFiltersUseIndexes(t *testing.T) {
	ctx := context.Background()
	db := testenv.MySQL(t)
	n := 200_000
	if v := os.Getenv("SLUICE_AUDIT_ROWS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("SLUICE_AUDIT_ROWS=%q: want a positive number", v)
		}
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO audit_log (at, actor, actor_user, action, object_type, object_name, app, detail)
		SELECT NOW() - INTERVAL seq SECOND, CONCAT('user', seq % 300), CONCAT('user', seq % 300),
			ELT(1 + (seq DIV 3) % 6, 'bucket.create', 'bucket.update', 'bucket.delete', 'member.grant', 'access.denied', 'login.success'),
			ELT(1 + (seq DIV 7) % 4, 'bucket', 'member', 'route', 'user'),
			CONCAT('b', seq % 5000), CONCAT('app', seq % 100), ''
		FROM seq_1_to_`+strconv.Itoa(n)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `ANALYZE TABLE audit_log`); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		f    Filter
	}{
		{"non-admin, by action", Filter{App: "app7", Action: "bucket.update"}},
		{"non-admin, by object type", Filter{App: "app7", ObjectType: "member"}},
		{"non-admin, one bucket", Filter{App: "app7", ObjectType: "bucket", ObjectName: "b7"}},
		{"non-admin, nothing else", Filter{App: "app7"}},
		{"non-admin, by actor", Filter{App: "app7", Actor: "user7"}},
		{"non-admin, by actor absent there", Filter{App: "app3", Actor: "user7"}},
		{"admin, by action", Filter{Action: "member.grant"}},
		{"admin, by object type", Filter{ObjectType: "user"}},
		{"admin, one bucket", Filter{ObjectType: "bucket", ObjectName: "b7"}},
		{"admin, by app", Filter{App: "app7"}},
		{"admin, everything", Filter{}},
		{"admin, by actor", Filter{Actor: "user7"}},
		{"next page by action", Filter{Action: "member.grant", Before: 100000}},
	} {
		q, args, err := listSQL(tt.f, database.DefaultPageSize+1)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := db.QueryxContext(ctx, "EXPLAIN "+q, args...)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			m := map[string]any{}
			if err := rows.MapScan(m); err != nil {
				t.Fatal(err)
			}
			str := func(k string) string {
				if b, ok := m[k].([]byte); ok {
					return string(b)
				}
				return ""
			}
			t.Logf("%s: type=%s key=%s rows=%s extra=%q", tt.name, str("type"), str("key"), str("rows"), str("Extra"))
			if str("type") == "ALL" || str("key") == "" {
				t.Errorf("%s: scans the table (type %s, key %q)", tt.name, str("type"), str("key"))
			}
			// Walking the primary key newest first and filtering row by
			// row is fine only where the optimizer expects a page within
			// a few thousand rows (a busy app); else it may walk the log.
			if rowsEst, _ := strconv.Atoi(str("rows")); str("type") == "index" && rowsEst > 100*database.DefaultPageSize {
				t.Errorf("%s: walks a whole index (%s, about %d rows) and filters row by row", tt.name, str("key"), rowsEst)
			}
			if strings.Contains(str("Extra"), "filesort") {
				t.Errorf("%s: sorts the rows it reads (%s), not read in id order", tt.name, str("Extra"))
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
	}

	// A few bucket names: one range of the object index per name, each
	// read in id order; only the merged rows (at most a page per name)
	// are sorted.
	for _, f := range []Filter{
		{ObjectType: "bucket", ObjectNames: []string{"b7", "b8", "b9"}},
		{ObjectType: "bucket", ObjectNames: []string{"b7", "b8"}, Apps: []string{"app7", "app8"}, After: 1000},
	} {
		q, args, err := listSQL(f, database.DefaultPageSize+1)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := db.QueryxContext(ctx, "EXPLAIN "+q, args...)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			m := map[string]any{}
			if err := rows.MapScan(m); err != nil {
				t.Fatal(err)
			}
			str := func(k string) string { b, _ := m[k].([]byte); return string(b) }
			if str("table") != "audit_log" {
				continue // the merge of the per-name rows
			}
			t.Logf("names %v: key=%s extra=%q", f.ObjectNames, str("key"), str("Extra"))
			if str("key") != "audit_log_object" || strings.Contains(str("Extra"), "filesort") {
				t.Errorf("names %v: a name's entries are read with key %q (%s), not in id order from the object index", f.ObjectNames, str("key"), str("Extra"))
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
	}

	// Pages as the audit page reads them, for the record.
	s := NewStore(db)
	visible := []string{"app3", "app7", "app11", "app42", "app99"}
	for name, f := range map[string]Filter{
		"non-admin (5 apps), by action":      {Apps: visible, Action: "member.grant"},
		"non-admin (5 apps), by object type": {Apps: visible, ObjectType: "user"},
		"non-admin (5 apps), by actor":       {Apps: visible, Actor: "user7"},
		"admin, by action":                   {Action: "member.grant"},
		"admin, by actor":                    {Actor: "user7"},
	} {
		start := time.Now()
		page, err := s.List(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Entries) == 0 {
			t.Errorf("%s: no entries", name)
		}
		t.Logf("%d rows, %s: first page of %d in %v", n, name, len(page.Entries), time.Since(start))
	}
}
