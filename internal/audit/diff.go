package audit

import (
	"encoding/json"
	"slices"
	"strings"
)

// Change is one field of an object that an entry changed: its path in the
// snapshot ("rate.period" for nested fields) and its JSON value before and
// after. A field the object gained has no Before; one it lost has no After.
type Change struct {
	Field  string
	Before string
	After  string
	// Added and Removed tell a field that was absent from one side from one
	// whose value was JSON null or empty.
	Added, Removed bool
}

// Changes compares the entry's snapshots field by field and returns the
// fields that differ, by path. A snapshot that is not a JSON object is
// compared as a whole, under the field "".
func (e Entry) Changes() []Change {
	if e.Before == "" && e.After == "" {
		return nil
	}
	before, after := map[string]string{}, map[string]string{}
	flatten(e.Before, before)
	flatten(e.After, after)
	var out []Change
	for f, b := range before {
		a, ok := after[f]
		if !ok {
			out = append(out, Change{Field: f, Before: b, Removed: true})
		} else if a != b {
			out = append(out, Change{Field: f, Before: b, After: a})
		}
	}
	for f, a := range after {
		if _, ok := before[f]; !ok {
			out = append(out, Change{Field: f, After: a, Added: true})
		}
	}
	slices.SortFunc(out, func(x, y Change) int { return strings.Compare(x.Field, y.Field) })
	return out
}

// flatten puts the fields of the JSON snapshot s into into, nested objects
// as dotted paths and every other value as compact JSON.
func flatten(s string, into map[string]string) {
	if s == "" {
		return
	}
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		into[""] = s
		return
	}
	m, ok := v.(map[string]any)
	if !ok {
		into[""] = compact(v)
		return
	}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
				walk(prefix+k+".", sub)
				continue
			}
			into[prefix+k] = compact(v)
		}
	}
	walk("", m)
}

func compact(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}
