package descriptors

// Index finds the mapping of a descriptor. Build it once per set of
// mappings (NewIndex) and share it: it is read-only and safe for
// concurrent use.
type Index struct {
	// by app, domain and entry count: mappings of that shape. Descriptors
	// match only mappings with as many entries, so the candidates per
	// lookup are few.
	m map[shape][]*Mapping
}

type shape struct {
	app, domain string
	n           int
}

// NewIndex indexes ms. Mappings that do not validate are left out.
func NewIndex(ms []*Mapping) *Index {
	ix := &Index{m: make(map[shape][]*Mapping, len(ms))}
	for _, m := range ms {
		if m == nil || m.Validate() != nil {
			continue
		}
		k := shape{m.App, m.Domain, len(m.Entries)}
		ix.m[k] = append(ix.m[k], m)
	}
	return ix
}

// Len is the number of mappings indexed.
func (ix *Index) Len() int {
	n := 0
	for _, ms := range ix.m {
		n += len(ms)
	}
	return n
}

// Match returns app's mapping for the descriptor with entries in domain,
// or nil. A mapping matches when it has as many entries, in the same order,
// with the same keys, and each of its values is empty or equal to the
// descriptor's. Of several matches the most specific wins: comparing entry
// by entry from the first, a fixed value beats "any value" (the order in
// which Envoy's own rate limit service walks its descriptor tree).
func (ix *Index) Match(app, domain string, entries []Entry) *Mapping {
	var best *Mapping
	for _, m := range ix.m[shape{app, domain, len(entries)}] {
		if matches(m, entries) && (best == nil || moreSpecific(m, best)) {
			best = m
		}
	}
	return best
}

func matches(m *Mapping, entries []Entry) bool {
	for i, e := range m.Entries {
		if e.Key != entries[i].Key || (e.Value != "" && e.Value != entries[i].Value) {
			return false
		}
	}
	return true
}

func moreSpecific(a, b *Mapping) bool {
	for i := range a.Entries {
		av, bv := a.Entries[i].Value != "", b.Entries[i].Value != ""
		if av != bv {
			return av
		}
	}
	return false
}

// Key returns the bucket key m takes from entries (the value of the entry
// named by KeyFrom), or "" when m's bucket is not keyed. entries must be
// a descriptor m matches.
func (m *Mapping) Key(entries []Entry) string {
	if m.KeyFrom == "" {
		return ""
	}
	for i, e := range m.Entries {
		if e.Key == m.KeyFrom {
			return entries[i].Value
		}
	}
	return ""
}
