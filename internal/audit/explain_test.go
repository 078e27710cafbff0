package audit

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/testenv"
)

// TestFiltersUseIndexes fills the log with 200,000 rows over 100 apps and
// checks with EXPLAIN that every filter the pages offer reads an index in
// id order: no full scan and no sort, so a page costs the same at ten
// million rows. A member's pages (the apps they see) are explained as
// List runs them: every read of the log is a range of an index that starts
// with the app or the object, from the index alone, rows read by primary
// key for the page alone, and the count likewise. SLUICE_AUDIT_ROWS=10000000
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

	// A member's pages: every read of the log is a range of an index that
	// starts with the app (or, for bucket names, the object index), read
	// in id order; rows are read by primary key for the page alone. The
	// apps are 10 of the 100, as for a member who owns 5 and views 5.
	member := []string{"app3", "app7", "app11", "app19", "app23", "app42", "app55", "app61", "app78", "app99"}
	for _, tt := range []struct {
		name string
		f    Filter
	}{
		{"member, first page", Filter{Apps: member}},
		{"member, a page of 500", Filter{Apps: member, Limit: 500}},
		{"member, older page", Filter{Apps: member, Before: 100000}},
		{"member, newer page", Filter{Apps: member, After: 100000}},
		{"member, by action", Filter{Apps: member, Action: "bucket.update"}},
		{"member, by object type", Filter{Apps: member, ObjectType: "member"}},
		{"member, by actor", Filter{Apps: member, Actor: "user7"}},
		{"member, one app", Filter{Apps: []string{"app7"}}},
		{"member, part of a name", Filter{Apps: member, ObjectType: "bucket", NameContains: "b12"}},
		{"member, bucket names", Filter{Apps: member, ObjectType: "bucket", ObjectNames: []string{"b7", "b8", "b9"}}},
	} {
		q, args, err := listSQL(tt.f, database.PageSize(tt.f.Limit)+1)
		if err != nil {
			t.Fatal(err)
		}
		// Each app's range is read from the index alone, a filter on part
		// of a name included (the name sits beside the id in
		// audit_log_app_type); the entries of a few bucket names are read
		// by row to check their app, and one app's page reads its rows
		// straight from its range (a page of rows: nothing else filters).
		checkMemberPlan(t, db, tt.name, q, args, len(tt.f.Apps) > 1 && len(tt.f.ObjectNames) == 0)
		// And its count, as the audit page shows it: up to 1,001 entries,
		// read from the index alone (the entries of a few bucket names are
		// few, and read by row to check their app).
		g := tt.f
		g.Before, g.After = 0, 0
		cq, cargs, err := countSQL(g)
		if err != nil {
			t.Fatal(err)
		}
		checkMemberPlan(t, db, tt.name+", count", cq, cargs, len(tt.f.ObjectNames) == 0)
		where, wargs := whereSQL(g)
		eq, eargs, err := sqlx.In(`SELECT COUNT(*) FROM audit_log`+where, wargs...)
		if err != nil {
			t.Fatal(err)
		}
		checkMemberPlan(t, db, tt.name+", exact count", eq, eargs, len(tt.f.ObjectNames) == 0)
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

// checkMemberPlan explains q and fails unless every read of audit_log is a
// range (or lookup) of an index that starts with the app or the object,
// in the index's order, or a read of one row by primary key; with
// indexOnly, from the index alone.
func checkMemberPlan(t *testing.T, db *sqlx.DB, name, q string, args []any, indexOnly bool) {
	t.Helper()
	rows, err := db.QueryxContext(context.Background(), "EXPLAIN "+q, args...)
	if err != nil {
		t.Fatalf("%s: explain: %v", name, err)
	}
	defer rows.Close()
	read := 0
	for rows.Next() {
		m := map[string]any{}
		if err := rows.MapScan(m); err != nil {
			t.Fatal(err)
		}
		str := func(k string) string { b, _ := m[k].([]byte); return string(b) }
		if table := str("table"); table != "audit_log" && table != "l" {
			continue // a merge of the ids read, at most a page per range
		}
		read++
		typ, key, extra := str("type"), str("key"), str("Extra")
		t.Logf("%s: table=%s type=%s key=%s rows=%s extra=%q", name, str("table"), typ, key, str("rows"), extra)
		switch {
		case typ == "eq_ref" && key == "PRIMARY":
			// The rows of the page, by id.
		case typ != "range" && typ != "ref":
			t.Errorf("%s: reads audit_log by %s on %q, not a range of an index", name, typ, key)
		case !strings.HasPrefix(key, "audit_log_app") && key != "audit_log_object":
			t.Errorf("%s: reads audit_log by index %q, not one that starts with the app or the object", name, key)
		case strings.Contains(extra, "filesort"):
			t.Errorf("%s: sorts what it reads of audit_log (%s), not read in id order", name, extra)
		case indexOnly && !strings.Contains(extra, "Using index") || strings.Contains(extra, "Using index condition"):
			t.Errorf("%s: reads a row of audit_log per entry (%s), not the index alone", name, extra)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if read == 0 {
		t.Errorf("%s: the plan never reads audit_log", name)
	}
}
