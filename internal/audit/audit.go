// Package audit records who changed what in Sluice, and when: every
// mutation, sign-in and denied access. Rows are written in the same
// transaction as the change they describe, so the log and the data can never
// disagree.
package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/sluicehq/sluice/internal/database"
)

// Actor is who performs an action: a user name ("alice", or "system" for
// the sync worker and bootstrap), how they came in ("console", "api",
// "cli") and from which address.
type Actor struct {
	User string
	Via  string
	Addr string
}

// System is the actor of changes Sluice makes by itself.
var System = Actor{User: "system", Via: "system"}

// Entry is one audit row. Before and After hold JSON snapshots of the
// object (empty when it did not exist before or after).
type Entry struct {
	ID         int64     `db:"id" json:"id"`
	At         time.Time `db:"at" json:"at"`
	Actor      string    `db:"actor" json:"actor"`
	Action     string    `db:"action" json:"action"`
	ObjectType string    `db:"object_type" json:"object_type"`
	ObjectName string    `db:"object_name" json:"object_name"`
	App        string    `db:"app" json:"app"`
	Before     string    `db:"before_json" json:"before,omitempty"`
	After      string    `db:"after_json" json:"after,omitempty"`
	RemoteAddr string    `db:"remote_addr" json:"remote_addr"`
	Detail     string    `db:"detail" json:"detail"`
}

// Snapshot renders v as the JSON stored in Before or After; nil gives "".
func Snapshot(v any) string {
	if v == nil {
		return ""
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%q", fmt.Sprint(v))
	}
	return string(b)
}

// Write inserts e, stamped with actor and the current time, through ex: a
// transaction for mutations, the pool for events that change nothing.
func Write(ctx context.Context, ex sqlx.ExecerContext, actor Actor, e Entry) error {
	if e.At.IsZero() {
		e.At = time.Now().UTC()
	}
	// actor_user is the user alone, for the actor filter.
	user := actor.User
	if e.Actor == "" {
		e.Actor = actor.User
		if actor.Via != "" && actor.Via != "console" {
			e.Actor = actor.User + " (" + actor.Via + ")"
		}
	} else {
		user, _, _ = strings.Cut(e.Actor, " (")
	}
	if e.RemoteAddr == "" {
		e.RemoteAddr = actor.Addr
	}
	_, err := ex.ExecContext(ctx, `INSERT INTO audit_log
		(at, actor, actor_user, action, object_type, object_name, app, before_json, after_json, remote_addr, detail)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		e.At, truncate(e.Actor, 64), truncate(user, 64), e.Action, e.ObjectType, truncate(e.ObjectName, 100), e.App,
		nullable(e.Before), nullable(e.After), truncate(e.RemoteAddr, 64), truncate(e.Detail, 500))
	if err != nil {
		return fmt.Errorf("write audit row: %w", database.Translate(err))
	}
	return nil
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// truncate keeps user-supplied text within its column, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	r := []rune(s)
	if len(r) > n {
		r = r[:n]
	}
	return string(r)
}
