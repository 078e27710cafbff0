package audit_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/audit"
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
