// Package descriptors holds descriptor mappings: how the decision service
// turns the rate limit descriptors a gateway sends (Envoy's domain and
// descriptor entries) into a bucket and, for keyed buckets, a key. A
// mapping belongs to one calling app. The MySQL store audits and versions
// every change and bumps the decision revision in the same transaction, so
// decision services pick the change up with one cheap query.
package descriptors

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/sluicehq/sluice/internal/apps"
	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/redisscript/names"
)

// Limits of a Mapping.
const (
	// MaxEntries is the most entries one descriptor may have; Envoy's
	// actions rarely chain more than a handful.
	MaxEntries = 8
	// MaxText is the longest domain, entry key and entry value, in bytes.
	MaxText = 255
)

// Entry is one descriptor entry to match: Key exactly, and Value exactly
// unless it is empty, which matches any value.
type Entry struct {
	Key   string `json:"key"`
	Value string `json:"value,omitempty"`
}

// Mapping sends the descriptors of one app that match Domain and Entries
// to Bucket. When KeyFrom names one of the entries, that entry's value is
// the key of a keyed bucket.
type Mapping struct {
	ID          int64   `json:"id"`
	App         string  `json:"app"`
	Domain      string  `json:"domain"`
	Entries     []Entry `json:"entries"`
	Bucket      string  `json:"bucket"`
	KeyFrom     string  `json:"key_from,omitempty"`
	Description string  `json:"description"`
	database.Stamp
}

// Validate checks every field a user sets and returns a *errs.Validation
// naming each invalid one (app, domain, entries, bucket, key_from,
// description), or nil. Whether the app and the bucket exist is checked by
// the Store.
func (m *Mapping) Validate() error {
	var v errs.Validation
	if r := names.Problem(m.App); r != "" {
		v.Add("app", r)
	}
	if r := textProblem(m.Domain, true); r != "" {
		v.Add("domain", r)
	}
	if r := entriesProblem(m.Entries); r != "" {
		v.Add("entries", r)
	}
	if r := names.Problem(m.Bucket); r != "" {
		v.Add("bucket", r)
	}
	if m.KeyFrom != "" {
		if r := keyFromProblem(m.KeyFrom, m.Entries); r != "" {
			v.Add("key_from", r)
		}
	}
	if r := apps.DescriptionProblem(m.Description); r != "" {
		v.Add("description", r)
	}
	return v.Err()
}

// textProblem checks a domain, key or value: printable UTF-8 without
// spaces, at most MaxText bytes.
func textProblem(s string, required bool) string {
	switch {
	case s == "" && required:
		return "is required"
	case len(s) > MaxText:
		return fmt.Sprintf("must be at most %d bytes", MaxText)
	case !utf8.ValidString(s):
		return "must be valid UTF-8 text"
	case strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) || unicode.IsSpace(r) }) >= 0:
		return "must not contain spaces or control characters"
	}
	return ""
}

func entriesProblem(es []Entry) string {
	if len(es) == 0 {
		return "must list at least one entry"
	}
	if len(es) > MaxEntries {
		return fmt.Sprintf("must list at most %d entries", MaxEntries)
	}
	for i, e := range es {
		if r := textProblem(e.Key, true); r != "" {
			return fmt.Sprintf("entry %d: key %s", i+1, r)
		}
		if r := textProblem(e.Value, false); r != "" {
			return fmt.Sprintf("entry %d: value %s", i+1, r)
		}
	}
	return ""
}

func keyFromProblem(key string, es []Entry) string {
	found := false
	for _, e := range es {
		if e.Key == key {
			if e.Value != "" {
				return fmt.Sprintf("entry %q has a fixed value; the key must come from an entry that matches any value", errs.Clip(key))
			}
			if found {
				return fmt.Sprintf("entry %q appears more than once", errs.Clip(key))
			}
			found = true
		}
	}
	if !found {
		return fmt.Sprintf("must be the key of one of the entries, not %q", errs.Clip(key))
	}
	return ""
}

// matchHash identifies what a mapping matches, for the unique index: two
// mappings of one app may not match exactly the same descriptors.
func (m *Mapping) matchHash() string {
	h := sha256.New()
	// Lengths first, so that no choice of texts can collide by shifting
	// bytes between fields.
	fmt.Fprintf(h, "%d:%s", len(m.Domain), m.Domain)
	for _, e := range m.Entries {
		fmt.Fprintf(h, "|%d:%s|%d:%s", len(e.Key), e.Key, len(e.Value), e.Value)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// CheckVersion refuses a change based on version based of m (0: whatever
// is stored) with an *errs.Stale carrying m.
func (m *Mapping) CheckVersion(based int64) error {
	return errs.CheckVersion(fmt.Sprintf("descriptor mapping %d", m.ID), m, m.Version, based)
}
