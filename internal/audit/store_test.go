package audit_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/testenv"
)

func TestList(t *testing.T) {
	ctx := context.Background()
	db := testenv.MySQL(t)
	alice := audit.Actor{User: "alice", Addr: "192.0.2.7"}
	aliceAPI := audit.Actor{User: "alice", Via: "api"}
	alicia := audit.Actor{User: "alice_x"}
	bob := audit.Actor{User: "bob", Via: "console"}
	rows := []struct {
		actor audit.Actor
		e     audit.Entry
	}{
		{alice, audit.Entry{Action: "app.create", ObjectType: "app", ObjectName: "shop", App: "shop", After: `{"name":"shop"}`}},
		{alice, audit.Entry{Action: "bucket.create", ObjectType: "bucket", ObjectName: "checkout", App: "shop", After: `{"v":1}`}},
		{bob, audit.Entry{Action: "login", ObjectType: "user", ObjectName: "bob"}},
		{aliceAPI, audit.Entry{Action: "bucket.update", ObjectType: "bucket", ObjectName: "checkout", App: "shop", Before: `{"v":1}`, After: `{"v":2}`}},
		{bob, audit.Entry{Action: "bucket.create", ObjectType: "bucket", ObjectName: "ranking", App: "search"}},
		{alicia, audit.Entry{Action: "bucket.delete", ObjectType: "bucket", ObjectName: "checkout", App: "shop", Before: `{"v":2}`}},
	}
	for _, r := range rows {
		if err := audit.Write(ctx, db, r.actor, r.e); err != nil {
			t.Fatal(err)
		}
	}
	s := audit.NewStore(db)
	list := func(f audit.Filter) []string {
		t.Helper()
		page, err := s.List(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		out := []string{}
		for _, e := range page.Entries {
			out = append(out, e.Action+" "+e.ObjectName)
		}
		return out
	}

	all, err := s.List(ctx, audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Entries) != 6 || all.Next != 0 {
		t.Fatalf("all: %d entries, next %d", len(all.Entries), all.Next)
	}
	for i := 1; i < len(all.Entries); i++ {
		if all.Entries[i].ID >= all.Entries[i-1].ID {
			t.Fatal("entries not newest first")
		}
	}
	newest, oldest := all.Entries[0], all.Entries[5]
	if newest.Action != "bucket.delete" || newest.Before != `{"v":2}` || newest.After != "" || newest.Actor != "alice_x" {
		t.Fatalf("newest %+v", newest)
	}
	if oldest.RemoteAddr != "192.0.2.7" || oldest.At.IsZero() || time.Since(oldest.At) > time.Minute {
		t.Fatalf("oldest %+v", oldest)
	}

	for _, tt := range []struct {
		f    audit.Filter
		want []string
	}{
		{audit.Filter{App: "shop"}, []string{"bucket.delete checkout", "bucket.update checkout", "bucket.create checkout", "app.create shop"}},
		{audit.Filter{ObjectType: "bucket", ObjectName: "checkout"}, []string{"bucket.delete checkout", "bucket.update checkout", "bucket.create checkout"}},
		{audit.Filter{ObjectType: "user"}, []string{"login bob"}},
		{audit.Filter{Actor: "alice"}, []string{"bucket.update checkout", "bucket.create checkout", "app.create shop"}},
		{audit.Filter{Actor: "alice_"}, []string{}},
		{audit.Filter{Actor: "bob", Action: "bucket.create"}, []string{"bucket.create ranking"}},
		{audit.Filter{Apps: []string{"search"}}, []string{"bucket.create ranking"}},
		{audit.Filter{Apps: []string{}}, []string{}},
		{audit.Filter{Apps: []string{"shop", "search"}, ObjectType: "user"}, []string{}},
		{audit.Filter{App: "shop", Apps: []string{"search"}}, []string{}},
		{audit.Filter{Actor: "\xff"}, []string{}},
		{audit.Filter{Apps: []string{"shop", "\xff"}}, []string{}},
		{audit.Filter{ObjectName: "x'; --"}, []string{}},
	} {
		if got := list(tt.f); !slices.Equal(got, tt.want) {
			t.Errorf("List(%+v) = %v; want %v", tt.f, got, tt.want)
		}
	}

	// Paging with the cursor visits every entry once, newest first.
	var paged []int64
	f := audit.Filter{Limit: 4}
	for range 5 {
		page, err := s.List(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Entries {
			paged = append(paged, e.ID)
		}
		if page.Next == 0 {
			break
		}
		f.Before = page.Next
	}
	var want []int64
	for _, e := range all.Entries {
		want = append(want, e.ID)
	}
	if !slices.Equal(paged, want) {
		t.Fatalf("paged ids %v; want %v", paged, want)
	}
	if got := fmt.Sprint(list(audit.Filter{Before: all.Entries[4].ID})); got != "[app.create shop]" {
		t.Fatalf("before the second oldest: %s", got)
	}
}

// TestChanges lists only the fields that differ, nested ones by path, and
// tells added and removed fields apart.
func TestChanges(t *testing.T) {
	e := audit.Entry{
		Before: `{"name":"b","max_permits":10,"rate":{"permits":5,"period":"1s"},"apps":["a"],"gone":1}`,
		After:  `{"name":"b","max_permits":20,"rate":{"permits":5,"period":"1m"},"apps":["a","c"],"new":null}`,
	}
	got := e.Changes()
	want := []audit.Change{
		{Field: "apps", Before: `["a"]`, After: `["a","c"]`},
		{Field: "gone", Before: `1`, Removed: true},
		{Field: "max_permits", Before: `10`, After: `20`},
		{Field: "new", After: `null`, Added: true},
		{Field: "rate.period", Before: `"1s"`, After: `"1m"`},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Changes() = %+v\nwant %+v", got, want)
	}
	if c := (audit.Entry{After: `{"a":1}`}).Changes(); len(c) != 1 || !c[0].Added {
		t.Errorf("a created object: %+v", c)
	}
	if c := (audit.Entry{Before: `not json`, After: `{"a":1}`}).Changes(); len(c) != 2 {
		t.Errorf("a snapshot that is not JSON: %+v", c)
	}
	if c := (audit.Entry{}).Changes(); c != nil {
		t.Errorf("no snapshots: %+v", c)
	}
}

// TestNameContainsPagingAndCount: the bucket name filter matches part of a
// name, its wildcards as plain characters, in few names or many; pages go
// back as well as forward; counts stop at their cap.
func TestNameContainsPagingAndCount(t *testing.T) {
	ctx := context.Background()
	db := testenv.MySQL(t)
	who := audit.Actor{User: "alice"}
	write := func(name, app string) {
		t.Helper()
		if err := audit.Write(ctx, db, who, audit.Entry{Action: "bucket.update", ObjectType: "bucket", ObjectName: name, App: app}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 120 {
		write(fmt.Sprintf("shop-%03d", i), "shop") // 120 names: more than a name list holds
	}
	write("a%b_c", "odd")
	write("axbyc", "odd")
	write("checkout", "shop")
	s := audit.NewStore(db)
	names := func(f audit.Filter) []string {
		t.Helper()
		page, err := s.List(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		out := []string{}
		for _, e := range page.Entries {
			out = append(out, e.ObjectName)
		}
		return out
	}
	for _, tt := range []struct {
		contains string
		apps     []string
		want     []string
	}{
		{"%b_", nil, []string{"a%b_c"}},
		{"b_c", nil, []string{"a%b_c"}},
		{"_", nil, []string{"a%b_c"}},
		{"!", nil, []string{}},
		{"eckou", nil, []string{"checkout"}},
		{"eckou", []string{"odd"}, []string{}},
		{"shop-11", nil, []string{"shop-119", "shop-118", "shop-117", "shop-116", "shop-115", "shop-114", "shop-113", "shop-112", "shop-111", "shop-110"}},
		{"op-00", []string{"shop"}, []string{"shop-009", "shop-008", "shop-007", "shop-006", "shop-005", "shop-004", "shop-003", "shop-002", "shop-001", "shop-000"}},
	} {
		if got := names(audit.Filter{ObjectType: "bucket", NameContains: tt.contains, Apps: tt.apps}); !slices.Equal(got, tt.want) {
			t.Errorf("contains %q: %v, want %v", tt.contains, got, tt.want)
		}
	}
	// A few names: one index range each, merged.
	for _, tt := range []struct {
		names []string
		apps  []string
		after int64
		want  []string
	}{
		{[]string{"shop-003", "a%b_c", "shop-001", "nope"}, nil, 0, []string{"a%b_c", "shop-003", "shop-001"}},
		{[]string{"shop-003", "a%b_c", "shop-001"}, []string{"shop"}, 0, []string{"shop-003", "shop-001"}},
		{[]string{"shop-003", "a%b_c", "shop-001"}, nil, 2, []string{"a%b_c", "shop-003"}},
	} {
		page, err := s.List(ctx, audit.Filter{ObjectType: "bucket", ObjectNames: tt.names, Apps: tt.apps, After: tt.after})
		if err != nil {
			t.Fatal(err)
		}
		got := []string{}
		for _, e := range page.Entries {
			got = append(got, e.ObjectName)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("names %v in %v after %d: %v, want %v", tt.names, tt.apps, tt.after, got, tt.want)
		}
	}
	if _, err := s.List(ctx, audit.Filter{ObjectType: "bucket", ObjectNames: make([]string, audit.MaxNames+1)}); !errors.Is(err, errs.ErrInvalid) {
		t.Errorf("too many names: %v", err)
	}

	// Many names match "shop-": read newest first, filtered row by row.
	first, err := s.List(ctx, audit.Filter{ObjectType: "bucket", NameContains: "shop-", Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Entries) != 50 || first.Entries[0].ObjectName != "shop-119" || first.Next == 0 || first.Prev != 0 {
		t.Fatalf("first page of shop-: %d entries from %q, next %d prev %d", len(first.Entries), first.Entries[0].ObjectName, first.Next, first.Prev)
	}
	second, err := s.List(ctx, audit.Filter{ObjectType: "bucket", NameContains: "shop-", Limit: 50, Before: first.Next})
	if err != nil {
		t.Fatal(err)
	}
	if second.Entries[0].ObjectName != "shop-069" || second.Next == 0 {
		t.Fatalf("second page starts at %q, next %d", second.Entries[0].ObjectName, second.Next)
	}
	// Back from the second page: the first page again, then nothing newer.
	back, err := s.List(ctx, audit.Filter{ObjectType: "bucket", NameContains: "shop-", Limit: 50, After: second.Entries[0].ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Entries) != 50 || back.Entries[0].ID != first.Entries[0].ID || back.Entries[49].ID != first.Entries[49].ID || back.Prev != 0 || back.Next != first.Next {
		t.Fatalf("back to the first page: %d entries, prev %d, next %d (want %d)", len(back.Entries), back.Prev, back.Next, first.Next)
	}
	mid, err := s.List(ctx, audit.Filter{Limit: 10, After: second.Entries[0].ID})
	if err != nil {
		t.Fatal(err)
	}
	if mid.Prev != mid.Entries[0].ID || mid.Entries[9].ID != second.Entries[0].ID+1 || mid.Next != mid.Entries[9].ID {
		t.Fatalf("a newer page in the middle: prev %d next %d, entries %d..%d", mid.Prev, mid.Next, mid.Entries[0].ID, mid.Entries[9].ID)
	}

	for _, tt := range []struct {
		f    audit.Filter
		want int
	}{
		{audit.Filter{}, 123},
		{audit.Filter{ObjectType: "bucket", NameContains: "shop-"}, 120},
		{audit.Filter{ObjectType: "bucket", NameContains: "b_c"}, 1},
		{audit.Filter{ObjectType: "bucket", NameContains: "zzz"}, 0},
		{audit.Filter{ObjectType: "bucket", ObjectNames: []string{"shop-003", "a%b_c"}}, 2},
		{audit.Filter{Apps: []string{"odd"}}, 2},
		{audit.Filter{Apps: []string{}}, 0},
		{audit.Filter{Apps: []string{"odd"}, App: "shop"}, 0},
		{audit.Filter{App: "shop", Before: 5}, 121},
	} {
		n, more, err := s.Count(ctx, tt.f)
		if err != nil {
			t.Fatal(err)
		}
		if n != tt.want || more {
			t.Errorf("Count(%+v) = %d, %v; want %d", tt.f, n, more, tt.want)
		}
	}

	// The count stops at 1,000: up to there it is exact, past it "more".
	for _, tt := range []struct {
		add  int // entries about "many", app "big"
		want int
		more bool
	}{{999, 999, false}, {1, 1000, false}, {1, 1000, true}} {
		if _, err := db.ExecContext(ctx, `INSERT INTO audit_log (at, actor, actor_user, action, object_type, object_name, app, detail)
			SELECT NOW(6), 'alice', 'alice', 'bucket.update', 'bucket', 'many', 'big', '' FROM seq_1_to_`+strconv.Itoa(tt.add)); err != nil {
			t.Fatal(err)
		}
		for _, f := range []audit.Filter{{App: "big"}, {Apps: []string{"big", "odd"}, ObjectType: "bucket", ObjectName: "many"}} {
			n, more, err := s.Count(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			if n != tt.want || more != tt.more {
				t.Errorf("Count(%+v) = %d, %v; want %d, %v", f, n, more, tt.want, tt.more)
			}
		}
	}
}
