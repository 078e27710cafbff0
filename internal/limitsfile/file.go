// Package limitsfile is the limits-as-code file: the apps, buckets (with
// their overrides) and descriptor mappings a team keeps in Git and applies
// from CI with the sluice-limits tool. It reads the file strictly (unknown
// fields are refused, errors carry line numbers), checks it with the same
// domain validators as the console and the API, and compares it with the
// live state to plan the changes an apply makes.
//
// The file manages the apps it lists: every bucket's owner app and every
// mapping's app must be one of them, and only objects of those apps are
// compared, changed or (with prune) deleted.
package limitsfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/internal/apps"
	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/descriptors"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/redisscript/quota"
)

// File is the whole file. Lists are kept in a canonical order by Sort.
type File struct {
	Apps     []App     `yaml:"apps" json:"apps"`
	Buckets  []Bucket  `yaml:"buckets,omitempty" json:"buckets,omitempty"`
	Mappings []Mapping `yaml:"mappings,omitempty" json:"mappings,omitempty"`
}

// App is an app the file manages.
type App struct {
	Name        string `yaml:"name" json:"name"`
	Description string `yaml:"description,omitempty" json:"description,omitempty"`
	// Version, when set, is the version the file was based on; see Bucket.
	Version int64 `yaml:"version,omitempty" json:"version,omitempty"`
}

// Bucket is a bucket and, for a keyed one, its overrides. The fields are
// the API's settable fields, with the same names.
type Bucket struct {
	Name        string   `yaml:"name" json:"name"`
	OwnerApp    string   `yaml:"owner_app" json:"owner_app"`
	Kind        string   `yaml:"kind,omitempty" json:"kind,omitempty"`
	Description string   `yaml:"description,omitempty" json:"description,omitempty"`
	MaxPermits  int64    `yaml:"max_permits" json:"max_permits"`
	Rate        string   `yaml:"rate,omitempty" json:"rate,omitempty"`
	AllowedApps []string `yaml:"allowed_apps,omitempty" json:"allowed_apps,omitempty"`
	Keyed       bool     `yaml:"keyed,omitempty" json:"keyed,omitempty"`
	Shadow      bool     `yaml:"shadow,omitempty" json:"shadow,omitempty"`
	LeaseMillis int64    `yaml:"lease_ms,omitempty" json:"lease_ms,omitempty"`
	QuotaPeriod string   `yaml:"quota_period,omitempty" json:"quota_period,omitempty"`
	TimeZone    string   `yaml:"time_zone,omitempty" json:"time_zone,omitempty"`
	// SlotMillis is a concurrency limit's slot lease time.
	SlotMillis int64 `yaml:"slot_ms,omitempty" json:"slot_ms,omitempty"`
	// Reserve is the tokens kept for critical requests (0, absent: none).
	Reserve int64 `yaml:"reserve,omitempty" json:"reserve,omitempty"`
	// Version, when set, is the version the file was based on (export
	// writes it): apply changes the bucket only if it is still at that
	// version, so an edit made in the console since is reported as a
	// conflict instead of being overwritten. Without it, apply uses the
	// version it reads just before writing.
	Version   int64      `yaml:"version,omitempty" json:"version,omitempty"`
	Overrides []Override `yaml:"overrides,omitempty" json:"overrides,omitempty"`
}

// Override is a different limit for some keys of a keyed bucket, named by
// its match and key.
type Override struct {
	Match       string `yaml:"match" json:"match"`
	Key         string `yaml:"key" json:"key"`
	Description string `yaml:"description,omitempty" json:"description,omitempty"`
	MaxPermits  int64  `yaml:"max_permits" json:"max_permits"`
	Rate        string `yaml:"rate,omitempty" json:"rate,omitempty"`
	Shadow      bool   `yaml:"shadow,omitempty" json:"shadow,omitempty"`
	Version     int64  `yaml:"version,omitempty" json:"version,omitempty"`
}

// Mapping sends the descriptors of an app that match a domain and entries
// to a bucket; it is named by its app, domain and entries.
type Mapping struct {
	App         string  `yaml:"app" json:"app"`
	Domain      string  `yaml:"domain" json:"domain"`
	Entries     []Entry `yaml:"entries" json:"entries"`
	Bucket      string  `yaml:"bucket" json:"bucket"`
	KeyFrom     string  `yaml:"key_from,omitempty" json:"key_from,omitempty"`
	Description string  `yaml:"description,omitempty" json:"description,omitempty"`
	Version     int64   `yaml:"version,omitempty" json:"version,omitempty"`
}

// Entry is one descriptor entry of a mapping: a key, and a value unless
// any value matches.
type Entry struct {
	Key   string `yaml:"key" json:"key"`
	Value string `yaml:"value,omitempty" json:"value,omitempty"`
}

func toEntries(es []Entry) []descriptors.Entry {
	out := make([]descriptors.Entry, len(es))
	for i, e := range es {
		out[i] = descriptors.Entry{Key: e.Key, Value: e.Value}
	}
	return out
}

// FromEntries turns a mapping's entries into the file's.
func FromEntries(es []descriptors.Entry) []Entry {
	out := make([]Entry, len(es))
	for i, e := range es {
		out[i] = Entry{Key: e.Key, Value: e.Value}
	}
	return out
}

// Decode reads a file strictly: one YAML document whose every field is
// known. Errors name the line. It does not validate; see Check.
func Decode(r io.Reader) (*File, *Lines, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f File
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil, errors.New("the file is empty")
		}
		return nil, nil, fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, nil, errors.New("the file must hold exactly one YAML document")
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, nil, err
	}
	return &f, linesOf(&root), nil
}

// Encode writes f as YAML, in canonical order, after a header comment.
func Encode(w io.Writer, f *File, header string) error {
	f.Sort()
	var buf bytes.Buffer
	for _, l := range strings.Split(strings.TrimRight(header, "\n"), "\n") {
		if header != "" {
			buf.WriteString("# " + l + "\n")
		}
	}
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(f); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// Lines remembers where each list item starts in the file, for messages.
type Lines struct {
	apps, buckets, mappings []int
	overrides               [][]int
}

func linesOf(root *yaml.Node) *Lines {
	l := &Lines{}
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 || root.Content[0].Kind != yaml.MappingNode {
		return l
	}
	m := root.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		items := m.Content[i+1].Content
		switch m.Content[i].Value {
		case "apps":
			l.apps = itemLines(items)
		case "mappings":
			l.mappings = itemLines(items)
		case "buckets":
			l.buckets = itemLines(items)
			for _, b := range items {
				var ol []int
				for j := 0; j+1 < len(b.Content); j += 2 {
					if b.Content[j].Value == "overrides" {
						ol = itemLines(b.Content[j+1].Content)
					}
				}
				l.overrides = append(l.overrides, ol)
			}
		}
	}
	return l
}

func itemLines(items []*yaml.Node) []int {
	out := make([]int, len(items))
	for i, n := range items {
		out[i] = n.Line
	}
	return out
}

func at(lines []int, i int) int {
	if i < len(lines) {
		return lines[i]
	}
	return 0
}

// Problem is one thing wrong with a file, at a line (0 when unknown).
type Problem struct {
	Line    int
	Message string
}

func (p Problem) String() string {
	if p.Line > 0 {
		return fmt.Sprintf("line %d: %s", p.Line, p.Message)
	}
	return p.Message
}

// Problems is every problem of a file; it is an error.
type Problems []Problem

func (ps Problems) Error() string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, "\n")
}

// Desired is a checked file in the domain's own types, each object next to
// the version the file based it on.
type Desired struct {
	Apps     []*apps.App
	Buckets  []*buckets.Bucket
	Mappings []*descriptors.Mapping
	// Overrides by bucket name.
	Overrides map[string][]*buckets.Override
}

// Check validates f with the domain's validators (the ones the console
// and the API run) plus the file's own rules: unique names, the managed
// apps, overrides only on keyed buckets. lines may be nil. It returns the
// file as domain objects, or Problems.
func Check(f *File, lines *Lines) (*Desired, error) {
	if lines == nil {
		lines = &Lines{}
	}
	var ps Problems
	add := func(line int, what string, err error) {
		if v := errs.Fields(err); v != nil {
			for _, fe := range v.Fields {
				ps = append(ps, Problem{line, fmt.Sprintf("%s: %s %s", what, fe.Field, fe.Reason)})
			}
			return
		}
		ps = append(ps, Problem{line, what + ": " + err.Error()})
	}
	d := &Desired{Overrides: map[string][]*buckets.Override{}}
	managed := map[string]bool{}
	for i, fa := range f.Apps {
		a := &apps.App{Name: fa.Name, Description: fa.Description}
		a.Version = fa.Version
		what := fmt.Sprintf("app %q", fa.Name)
		if err := a.Validate(); err != nil {
			add(at(lines.apps, i), what, err)
		}
		if managed[a.Name] {
			add(at(lines.apps, i), what, errors.New("is listed twice"))
		}
		managed[a.Name] = true
		d.Apps = append(d.Apps, a)
	}
	seen := map[string]bool{}
	for i, fb := range f.Buckets {
		line := at(lines.buckets, i)
		what := fmt.Sprintf("bucket %q", fb.Name)
		b := &buckets.Bucket{Name: fb.Name, OwnerApp: fb.OwnerApp, Kind: buckets.Kind(fb.Kind), Description: fb.Description, MaxPermits: fb.MaxPermits,
			AllowedApps: slices.Clone(fb.AllowedApps), Keyed: fb.Keyed, Shadow: fb.Shadow, LeaseMillis: fb.LeaseMillis,
			SlotMillis: fb.SlotMillis, QuotaPeriod: quota.Period(fb.QuotaPeriod), TimeZone: fb.TimeZone, Reserve: fb.Reserve}
		b.Version = fb.Version
		var v errs.Validation
		rate, err := buckets.ParseOptionalRate(fb.Rate)
		if err != nil {
			v.Add("rate", errs.Fields(err).For("rate"))
		}
		b.Rate = rate
		if err := b.Validate(); err != nil {
			for _, fe := range errs.Fields(err).Fields {
				if fe.Field != "rate" || v.For("rate") == "" {
					v.Add(fe.Field, fe.Reason)
				}
			}
		}
		if err := v.Err(); err != nil {
			add(line, what, err)
		}
		if seen[b.Name] {
			add(line, what, errors.New("is listed twice"))
		}
		seen[b.Name] = true
		if b.OwnerApp != "" && !managed[b.OwnerApp] {
			add(line, what, fmt.Errorf("owner_app %q is not one of the file's apps (the file manages the apps it lists)", b.OwnerApp))
		}
		if len(fb.Overrides) > 0 && !fb.Keyed {
			add(line, what, errors.New("overrides need a keyed bucket (keyed: true)"))
		}
		d.Buckets = append(d.Buckets, b)
		okeys := map[string]bool{}
		for j, fo := range fb.Overrides {
			oline := 0
			if i < len(lines.overrides) {
				oline = at(lines.overrides[i], j)
			}
			owhat := fmt.Sprintf("bucket %q: override %s %q", fb.Name, fo.Match, fo.Key)
			o := &buckets.Override{Bucket: fb.Name, Match: buckets.Match(fo.Match), Key: fo.Key, Description: fo.Description,
				MaxPermits: fo.MaxPermits, Shadow: fo.Shadow}
			o.Version = fo.Version
			var ov errs.Validation
			rate, err := buckets.ParseOptionalRate(fo.Rate)
			if err != nil {
				ov.Add("rate", errs.Fields(err).For("rate"))
			}
			o.Rate = rate
			if err := o.Validate(); err != nil {
				for _, fe := range errs.Fields(err).Fields {
					if fe.Field != "rate" || ov.For("rate") == "" {
						ov.Add(fe.Field, fe.Reason)
					}
				}
			}
			if err := ov.Err(); err != nil {
				add(oline, owhat, err)
			}
			k := overrideID(o)
			if okeys[k] {
				add(oline, owhat, errors.New("is listed twice"))
			}
			okeys[k] = true
			d.Overrides[b.Name] = append(d.Overrides[b.Name], o)
		}
	}
	mseen := map[string]bool{}
	for i, fm := range f.Mappings {
		line := at(lines.mappings, i)
		m := &descriptors.Mapping{App: fm.App, Domain: fm.Domain, Entries: toEntries(fm.Entries), Bucket: fm.Bucket,
			KeyFrom: fm.KeyFrom, Description: fm.Description}
		m.Version = fm.Version
		what := "mapping " + MappingID(m)
		if err := m.Validate(); err != nil {
			add(line, what, err)
		}
		if m.App != "" && !managed[m.App] {
			add(line, what, fmt.Errorf("app %q is not one of the file's apps (the file manages the apps it lists)", m.App))
		}
		id := MappingID(m)
		if mseen[id] {
			add(line, what, errors.New("is listed twice (a mapping is named by its app, domain and entries)"))
		}
		mseen[id] = true
		d.Mappings = append(d.Mappings, m)
	}
	if len(ps) > 0 {
		return nil, ps
	}
	return d, nil
}

// MappingID names a mapping by what it matches: app, domain and entries,
// "gateway/edge[remote_address=*]".
func MappingID(m *descriptors.Mapping) string {
	var b strings.Builder
	b.WriteString(m.App + "/" + m.Domain + "[")
	for i, e := range m.Entries {
		if i > 0 {
			b.WriteString(",")
		}
		v := e.Value
		if v == "" {
			v = "*"
		} else {
			v = fmt.Sprintf("%q", v)
		}
		b.WriteString(e.Key + "=" + v)
	}
	b.WriteString("]")
	return b.String()
}

func overrideID(o *buckets.Override) string { return string(o.Match) + " " + o.Key }

// Sort puts every list in its canonical order: apps and buckets by name,
// overrides by match and key, mappings by app, domain and entries.
func (f *File) Sort() {
	slices.SortFunc(f.Apps, func(a, b App) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(f.Buckets, func(a, b Bucket) int { return strings.Compare(a.Name, b.Name) })
	for i := range f.Buckets {
		slices.SortFunc(f.Buckets[i].Overrides, func(a, b Override) int {
			return strings.Compare(a.Match+" "+a.Key, b.Match+" "+b.Key)
		})
	}
	slices.SortFunc(f.Mappings, func(a, b Mapping) int {
		return strings.Compare(fileMappingID(a), fileMappingID(b))
	})
}

func fileMappingID(m Mapping) string {
	return MappingID(&descriptors.Mapping{App: m.App, Domain: m.Domain, Entries: toEntries(m.Entries)})
}

// ToFile writes d as a file. With versions, each object carries the
// version it has, so that an apply of the file refuses to overwrite a
// later edit; without, the file holds settings only (what a file kept in
// Git usually wants). Only the apps in only (all when empty) and their
// objects are written.
func ToFile(d *Desired, versions bool, only []string) *File {
	keep := func(app string) bool { return len(only) == 0 || slices.Contains(only, app) }
	v := func(n int64) int64 {
		if versions {
			return n
		}
		return 0
	}
	f := &File{Apps: []App{}}
	for _, a := range d.Apps {
		if keep(a.Name) {
			f.Apps = append(f.Apps, App{Name: a.Name, Description: a.Description, Version: v(a.Version)})
		}
	}
	for _, b := range d.Buckets {
		if !keep(b.OwnerApp) {
			continue
		}
		fb := Bucket{Name: b.Name, OwnerApp: b.OwnerApp, Kind: kindOf(b), Description: b.Description, MaxPermits: b.MaxPermits,
			Rate: b.Rate.String(), AllowedApps: b.AllowedApps, Keyed: b.Keyed, Shadow: b.Shadow,
			LeaseMillis: b.LeaseMillis, SlotMillis: b.SlotMillis, QuotaPeriod: string(b.QuotaPeriod), TimeZone: b.TimeZone,
			Reserve: b.Reserve, Version: v(b.Version)}
		for _, o := range d.Overrides[b.Name] {
			fb.Overrides = append(fb.Overrides, Override{Match: string(o.Match), Key: o.Key, Description: o.Description,
				MaxPermits: o.MaxPermits, Rate: o.Rate.String(), Shadow: o.Shadow, Version: v(o.Version)})
		}
		f.Buckets = append(f.Buckets, fb)
	}
	for _, m := range d.Mappings {
		if keep(m.App) {
			f.Mappings = append(f.Mappings, Mapping{App: m.App, Domain: m.Domain, Entries: FromEntries(m.Entries),
				Bucket: m.Bucket, KeyFrom: m.KeyFrom, Description: m.Description, Version: v(m.Version)})
		}
	}
	f.Sort()
	return f
}

// kindOf is the kind a file writes for b: nothing for a token bucket, the
// kind every limit had before kinds existed, so such files stay as they were.
func kindOf(b *buckets.Bucket) string {
	if b.Kind.Or() == buckets.KindBucket {
		return ""
	}
	return string(b.Kind)
}
