package limitsfile

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/internal/apps"
	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/descriptors"
)

// Op is what a Change does.
type Op string

// Ops of a Change, as the plan prints them.
const (
	Create Op = "+"
	Update Op = "~"
	Delete Op = "-"
)

// Change is one write an apply makes. Exactly one of App, Bucket,
// Override and Mapping is set: the desired object (for Delete, the live
// one). IfMatch is the version the write is conditional on (0 for a
// creation).
type Change struct {
	Op       Op
	App      *apps.App
	Bucket   *buckets.Bucket
	Override *buckets.Override
	Mapping  *descriptors.Mapping
	// ID is the live id of an override or a mapping to update or delete.
	ID      int64
	IfMatch int64
	// Fields says what an Update changes, "max_permits: 10 -> 20".
	Fields []string
}

// Subject names the object, "bucket \"orders\"".
func (c *Change) Subject() string {
	switch {
	case c.App != nil:
		return fmt.Sprintf("app %q", c.App.Name)
	case c.Bucket != nil:
		return fmt.Sprintf("bucket %q", c.Bucket.Name)
	case c.Override != nil:
		return fmt.Sprintf("override %s %q of bucket %q", c.Override.Match, c.Override.Key, c.Override.Bucket)
	default:
		return "mapping " + MappingID(c.Mapping)
	}
}

// Plan is what an apply of a file does to the live state, in the order
// it does it: creations and updates (apps, buckets, overrides, mappings),
// then deletions (mappings, overrides, buckets).
type Plan struct {
	Changes []Change
	// Conflicts are objects the file based on a version the live state
	// has moved past, with different settings: applying would overwrite
	// someone else's edit, so apply refuses to start.
	Conflicts []string
	// Errors are changes the API cannot make (a bucket's owner app or
	// keyed flag); apply refuses to start.
	Errors []string
	// Notes are differences apply leaves alone, said for the reader.
	Notes []string
	// Unpruned counts the live objects of the managed apps that the file
	// does not list, left alone without prune.
	Unpruned []string
}

// Empty reports whether the plan changes nothing.
func (p *Plan) Empty() bool { return len(p.Changes) == 0 }

// Compute compares desired with live (the objects the caller can see) and
// returns the plan. Only live objects of the apps desired lists are
// considered; with prune, those the file does not list are deleted.
func Compute(desired, live *Desired, prune bool) *Plan {
	p := &Plan{}
	managed := map[string]bool{}
	for _, a := range desired.Apps {
		managed[a.Name] = true
	}

	liveApps := map[string]*apps.App{}
	for _, a := range live.Apps {
		liveApps[a.Name] = a
	}
	for _, a := range sorted(desired.Apps, func(a *apps.App) string { return a.Name }) {
		la, ok := liveApps[a.Name]
		if !ok {
			p.Changes = append(p.Changes, Change{Op: Create, App: a})
			continue
		}
		if la.Description != a.Description {
			p.Notes = append(p.Notes, fmt.Sprintf("app %q: the description differs (%q live); the API cannot change an app's description, so apply leaves it", a.Name, la.Description))
		}
	}

	liveBuckets := map[string]*buckets.Bucket{}
	for _, b := range live.Buckets {
		liveBuckets[b.Name] = b
	}
	wanted := map[string]bool{}
	var overrideChanges, overrideDeletes []Change
	for _, b := range sorted(desired.Buckets, func(b *buckets.Bucket) string { return b.Name }) {
		wanted[b.Name] = true
		lb, ok := liveBuckets[b.Name]
		if !ok {
			p.Changes = append(p.Changes, Change{Op: Create, Bucket: b})
			for _, o := range sorted(desired.Overrides[b.Name], overrideID) {
				overrideChanges = append(overrideChanges, Change{Op: Create, Override: o})
			}
			continue
		}
		subject := fmt.Sprintf("bucket %q", b.Name)
		if !managed[lb.OwnerApp] || lb.OwnerApp != b.OwnerApp {
			p.Errors = append(p.Errors, fmt.Sprintf("%s: owner_app is %q live and cannot change; delete the bucket and create it again", subject, lb.OwnerApp))
			continue
		}
		if lb.Kind.Or() != b.Kind.Or() {
			p.Errors = append(p.Errors, fmt.Sprintf("%s: kind is %s live and cannot change; delete the bucket and create it again", subject, lb.Kind.Or()))
			continue
		}
		if lb.Keyed != b.Keyed {
			p.Errors = append(p.Errors, fmt.Sprintf("%s: keyed is %t live and cannot change; delete the bucket and create it again", subject, lb.Keyed))
			continue
		}
		if fields := bucketFields(lb, b); len(fields) > 0 {
			if b.Version != 0 && b.Version != lb.Version {
				p.Conflicts = append(p.Conflicts, conflict(subject, b.Version, lb.Version))
			} else {
				p.Changes = append(p.Changes, Change{Op: Update, Bucket: b, IfMatch: lb.Version, Fields: fields})
			}
		}
		oc, od := planOverrides(p, desired.Overrides[b.Name], live.Overrides[b.Name], prune)
		overrideChanges = append(overrideChanges, oc...)
		overrideDeletes = append(overrideDeletes, od...)
	}
	p.Changes = append(p.Changes, overrideChanges...)

	liveMappings := map[string]*descriptors.Mapping{}
	for _, m := range live.Mappings {
		liveMappings[MappingID(m)] = m
	}
	wantedMappings := map[string]bool{}
	for _, m := range sorted(desired.Mappings, MappingID) {
		id := MappingID(m)
		wantedMappings[id] = true
		lm, ok := liveMappings[id]
		if !ok {
			p.Changes = append(p.Changes, Change{Op: Create, Mapping: m})
			continue
		}
		if fields := mappingFields(lm, m); len(fields) > 0 {
			if m.Version != 0 && m.Version != lm.Version {
				p.Conflicts = append(p.Conflicts, conflict("mapping "+id, m.Version, lm.Version))
			} else {
				p.Changes = append(p.Changes, Change{Op: Update, Mapping: m, ID: lm.ID, IfMatch: lm.Version, Fields: fields})
			}
		}
	}

	// Deletions, most dependent first.
	for _, m := range sorted(live.Mappings, MappingID) {
		if managed[m.App] && !wantedMappings[MappingID(m)] {
			p.prune(prune, Change{Op: Delete, Mapping: m, ID: m.ID, IfMatch: m.Version})
		}
	}
	p.Changes = append(p.Changes, overrideDeletes...)
	for _, b := range sorted(live.Buckets, func(b *buckets.Bucket) string { return b.Name }) {
		if managed[b.OwnerApp] && !wanted[b.Name] {
			p.prune(prune, Change{Op: Delete, Bucket: b, IfMatch: b.Version})
		}
	}
	return p
}

func (p *Plan) prune(prune bool, c Change) {
	if prune {
		p.Changes = append(p.Changes, c)
	} else {
		p.Unpruned = append(p.Unpruned, c.Subject())
	}
}

func conflict(subject string, based, live int64) string {
	return fmt.Sprintf("%s: the file is based on version %d but it is now at version %d with other settings (edited since); export again or remove its version to overwrite", subject, based, live)
}

func planOverrides(p *Plan, desired, live []*buckets.Override, prune bool) (changes, deletes []Change) {
	byID := map[string]*buckets.Override{}
	for _, o := range live {
		byID[overrideID(o)] = o
	}
	wanted := map[string]bool{}
	for _, o := range sorted(desired, overrideID) {
		wanted[overrideID(o)] = true
		lo, ok := byID[overrideID(o)]
		if !ok {
			changes = append(changes, Change{Op: Create, Override: o})
			continue
		}
		if fields := overrideFields(lo, o); len(fields) > 0 {
			c := Change{Op: Update, Override: o, ID: lo.ID, IfMatch: lo.Version, Fields: fields}
			if o.Version != 0 && o.Version != lo.Version {
				p.Conflicts = append(p.Conflicts, conflict(c.Subject(), o.Version, lo.Version))
				continue
			}
			changes = append(changes, c)
		}
	}
	for _, o := range sorted(live, overrideID) {
		if !wanted[overrideID(o)] {
			c := Change{Op: Delete, Override: o, ID: o.ID, IfMatch: o.Version}
			if prune {
				deletes = append(deletes, c)
			} else {
				p.Unpruned = append(p.Unpruned, c.Subject())
			}
		}
	}
	return changes, deletes
}

func sorted[T any](xs []T, key func(T) string) []T {
	out := slices.Clone(xs)
	slices.SortStableFunc(out, func(a, b T) int { return strings.Compare(key(a), key(b)) })
	return out
}

// field appends "name: old -> new" to fields when old and new differ.
func field[T comparable](fields []string, name string, old, new T) []string {
	if old == new {
		return fields
	}
	return append(fields, fmt.Sprintf("%s: %s -> %s", name, show(old), show(new)))
}

func show(v any) string {
	switch v := v.(type) {
	case string:
		return fmt.Sprintf("%q", v)
	case buckets.Rate:
		return v.String()
	}
	return fmt.Sprint(v)
}

func bucketFields(live, want *buckets.Bucket) []string {
	var f []string
	f = field(f, "description", live.Description, want.Description)
	f = field(f, "max_permits", live.MaxPermits, want.MaxPermits)
	f = field(f, "rate", live.Rate, want.Rate)
	f = field(f, "allowed_apps", strings.Join(live.AllowedApps, ","), strings.Join(want.AllowedApps, ","))
	f = field(f, "shadow", live.Shadow, want.Shadow)
	f = field(f, "lease_ms", live.LeaseMillis, want.LeaseMillis)
	f = field(f, "quota_period", string(live.QuotaPeriod), string(want.QuotaPeriod))
	f = field(f, "time_zone", live.TimeZone, want.TimeZone)
	f = field(f, "slot_ms", live.SlotMillis, want.SlotMillis)
	f = field(f, "reserve", live.Reserve, want.Reserve)
	return f
}

func overrideFields(live, want *buckets.Override) []string {
	var f []string
	f = field(f, "description", live.Description, want.Description)
	f = field(f, "max_permits", live.MaxPermits, want.MaxPermits)
	f = field(f, "rate", live.Rate, want.Rate)
	f = field(f, "shadow", live.Shadow, want.Shadow)
	return f
}

func mappingFields(live, want *descriptors.Mapping) []string {
	var f []string
	f = field(f, "bucket", live.Bucket, want.Bucket)
	f = field(f, "key_from", live.KeyFrom, want.KeyFrom)
	f = field(f, "description", live.Description, want.Description)
	return f
}

// Write prints the plan for people and CI logs, one line per change, in
// the order apply makes them.
func (p *Plan) Write(w *strings.Builder) {
	for _, c := range p.Changes {
		w.WriteString(string(c.Op) + " " + c.Subject())
		switch {
		case c.Op == Update:
			w.WriteString(": " + strings.Join(c.Fields, ", "))
		case c.Op == Create && c.Bucket != nil:
			b := c.Bucket
			fmt.Fprintf(w, ": owner_app %q, max_permits %d, rate %s, allowed_apps %s", b.OwnerApp, b.MaxPermits, b.Rate, strings.Join(b.AllowedApps, ","))
			if b.Keyed {
				w.WriteString(", keyed")
			}
			if b.Shadow {
				w.WriteString(", shadow")
			}
			if b.LeaseMillis != 0 {
				fmt.Fprintf(w, ", lease_ms %d", b.LeaseMillis)
			}
			if b.QuotaPeriod != "" {
				fmt.Fprintf(w, ", quota_period %s, time_zone %s", b.QuotaPeriod, b.TimeZone)
			}
			if b.SlotMillis != 0 {
				fmt.Fprintf(w, ", slot_ms %d", b.SlotMillis)
			}
			if b.Reserve != 0 {
				fmt.Fprintf(w, ", reserve %d", b.Reserve)
			}
		case c.Op == Delete && c.Bucket != nil && c.Bucket.Keyed:
			w.WriteString(" (with its overrides)")
		case c.Op == Create && c.Override != nil:
			fmt.Fprintf(w, ": max_permits %d, rate %s", c.Override.MaxPermits, c.Override.Rate)
			if c.Override.Shadow {
				w.WriteString(", shadow")
			}
		case c.Op == Create && c.Mapping != nil:
			fmt.Fprintf(w, ": bucket %q", c.Mapping.Bucket)
			if c.Mapping.KeyFrom != "" {
				fmt.Fprintf(w, ", key_from %q", c.Mapping.KeyFrom)
			}
		}
		w.WriteString("\n")
	}
	for _, s := range p.Conflicts {
		w.WriteString("! conflict: " + s + "\n")
	}
	for _, s := range p.Errors {
		w.WriteString("! error: " + s + "\n")
	}
	for _, s := range p.Notes {
		w.WriteString("note: " + s + "\n")
	}
	if len(p.Unpruned) > 0 {
		fmt.Fprintf(w, "note: %d live object(s) of the file's apps are not in the file and stay (apply -prune deletes them):\n", len(p.Unpruned))
		for _, s := range p.Unpruned {
			w.WriteString("  " + s + "\n")
		}
	}
	var add, change, del int
	for _, c := range p.Changes {
		switch c.Op {
		case Create:
			add++
		case Update:
			change++
		case Delete:
			del++
		}
	}
	if p.Empty() {
		w.WriteString("No changes.\n")
	} else {
		fmt.Fprintf(w, "%d to create, %d to change, %d to delete.\n", add, change, del)
	}
}
