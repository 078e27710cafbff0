package audit

import (
	"encoding/json"
	"slices"
)

// bookkeeping are the snapshot fields every change of a stored object
// moves: they say nothing about what a person changed.
var bookkeeping = []string{"id", "version", "created_at", "created_by", "updated_at", "updated_by"}

// ShownChanges is what the audit log shows of the entry's changes: the
// fields a person set, without bookkeeping fields, and for a creation
// only the fields given a value (not the empty defaults).
func (e Entry) ShownChanges() []Change {
	all := e.Changes()
	out := make([]Change, 0, len(all))
	for _, c := range all {
		if slices.Contains(bookkeeping, c.Field) {
			continue
		}
		if e.Before == "" && c.Added && emptyJSON(c.After) {
			continue
		}
		out = append(out, c)
	}
	return out
}

// emptyJSON reports whether a compact JSON value is a zero one.
func emptyJSON(v string) bool {
	switch v {
	case `""`, `0`, `false`, `null`, `[]`, `{}`:
		return true
	}
	return false
}

// OverrideKey is the key of the override the entry is about ("" for
// other entries), so that the log names it beside its bucket.
func (e Entry) OverrideKey() string {
	if e.ObjectType != "override" {
		return ""
	}
	for _, s := range []string{e.After, e.Before} {
		var o struct {
			Key   string `json:"key"`
			Match string `json:"match"`
		}
		if s != "" && json.Unmarshal([]byte(s), &o) == nil && o.Key != "" {
			if o.Match == "prefix" {
				return "prefix " + o.Key
			}
			return o.Key
		}
	}
	return ""
}
