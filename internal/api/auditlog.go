package api

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/internal/manage"
)

// entryJSON is an audit entry as the API returns it. Before and after are
// the JSON snapshots of the object, embedded as JSON, or absent.
type entryJSON struct {
	ID         int64           `json:"id"`
	At         time.Time       `json:"at"`
	Actor      string          `json:"actor"`
	Action     string          `json:"action"`
	ObjectType string          `json:"object_type"`
	ObjectName string          `json:"object_name"`
	App        string          `json:"app,omitempty"`
	Before     json.RawMessage `json:"before,omitempty"`
	After      json.RawMessage `json:"after,omitempty"`
	RemoteAddr string          `json:"remote_addr,omitempty"`
	Detail     string          `json:"detail,omitempty"`
}

// snapshot embeds a stored snapshot, or quotes it should it not be JSON.
func snapshot(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	q, _ := json.Marshal(s)
	return q
}

// listAudit: GET /audit?app=&object_type=&object=&actor=&action=&cursor=&limit=,
// newest first. Admins see every entry; others see the entries about the
// apps they are members of (and those apps' buckets).
func (s *server) listAudit(w http.ResponseWriter, r *http.Request, c manage.Caller) error {
	var f manage.AuditFilter
	for _, p := range []struct {
		name string
		dst  *string
		max  int
	}{
		{"app", &f.App, 63},
		{"object_type", &f.ObjectType, 32},
		{"object", &f.ObjectName, 100},
		{"actor", &f.Actor, 64},
		{"action", &f.Action, 64},
	} {
		v, err := query(r, p.name, p.max)
		if err != nil {
			return err
		}
		*p.dst = v
	}
	cursor, limit, err := page(r, "audit")
	if err != nil {
		return err
	}
	if cursor != "" {
		n, err := strconv.ParseInt(cursor, 10, 64)
		if err != nil || n < 1 {
			return badParam("cursor", "must be a next_cursor returned by this list")
		}
		f.Before = n
	}
	f.Limit = limit
	p, err := s.svc.ListAudit(r.Context(), c, f)
	if err != nil {
		return err
	}
	out := struct {
		Entries    []entryJSON `json:"entries"`
		NextCursor string      `json:"next_cursor,omitempty"`
	}{Entries: make([]entryJSON, 0, len(p.Entries))}
	if p.Next > 0 {
		out.NextCursor = nextCursor("audit", strconv.FormatInt(p.Next, 10))
	}
	for _, e := range p.Entries {
		out.Entries = append(out.Entries, entryJSON{
			ID: e.ID, At: e.At, Actor: e.Actor, Action: e.Action, ObjectType: e.ObjectType,
			ObjectName: e.ObjectName, App: e.App, Before: snapshot(e.Before), After: snapshot(e.After),
			RemoteAddr: e.RemoteAddr, Detail: e.Detail,
		})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
