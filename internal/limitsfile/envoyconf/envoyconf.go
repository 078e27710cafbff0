// Package envoyconf converts the YAML configuration of envoyproxy/ratelimit
// (domains of nested descriptors with rate limits) into a Sluice limits
// file: one bucket and one descriptor mapping per limited descriptor path.
// What has no equivalent in Sluice is returned as findings, each naming
// the domain and descriptor path, never dropped silently.
//
// The correspondence:
//   - a descriptor path (its keys and values, outermost first) is a
//     mapping's entries; an entry without a value matches any value, as in
//     envoy ratelimit, where each value then gets its own limit: the
//     bucket is keyed by that entry (key_from);
//   - requests_per_unit per unit is a bucket of capacity requests_per_unit
//     refilled at requests_per_unit per unit (envoy ratelimit counts in
//     fixed windows; a token bucket admits the same number per unit in the
//     long run and the same burst, without the double burst at a window's
//     edge);
//   - shadow_mode is the bucket's shadow mode; name names the bucket.
package envoyconf

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/descriptors"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/limitsfile"
	"github.com/sluicehq/sluice/internal/redisscript/names"
)

// Config is one domain of envoy ratelimit's configuration (one YAML
// document).
type Config struct {
	Domain      string       `yaml:"domain"`
	Descriptors []Descriptor `yaml:"descriptors"`
}

// Descriptor is one level of a descriptor tree.
type Descriptor struct {
	Key            string         `yaml:"key"`
	Value          string         `yaml:"value"`
	RateLimit      *RateLimit     `yaml:"rate_limit"`
	Descriptors    []Descriptor   `yaml:"descriptors"`
	ShadowMode     bool           `yaml:"shadow_mode"`
	QuotaMode      bool           `yaml:"quota_mode"`
	DetailedMetric bool           `yaml:"detailed_metric"`
	ValueToMetric  bool           `yaml:"value_to_metric"`
	ShareThreshold bool           `yaml:"share_threshold"`
	Metadata       map[string]any `yaml:"metadata"`
}

// RateLimit is the limit of a descriptor.
type RateLimit struct {
	RequestsPerUnit uint32 `yaml:"requests_per_unit"`
	Unit            string `yaml:"unit"`
	Unlimited       bool   `yaml:"unlimited"`
	Name            string `yaml:"name"`
	Replaces        []struct {
		Name string `yaml:"name"`
	} `yaml:"replaces"`
}

// Decode reads every YAML document of r (envoy ratelimit allows several
// domains per file, separated by ---), refusing keys envoy ratelimit does
// not know, as it does.
func Decode(r io.Reader) ([]Config, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var out []Config
	for {
		var c Config
		err := dec.Decode(&c)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, errors.New(strings.TrimPrefix(err.Error(), "yaml: "))
		}
		if c.Domain == "" && len(c.Descriptors) == 0 {
			continue // an empty document
		}
		if c.Domain == "" {
			return nil, fmt.Errorf("document %d: domain is required", len(out)+1)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no domain found")
	}
	return out, nil
}

// Severity says how far a finding is from an equivalent.
type Severity string

// Severities of findings.
const (
	// Unmapped: no mapping was made for the descriptor; Sluice decides it
	// differently (as unmatched, or by a less specific mapping).
	Unmapped Severity = "unmapped"
	// Approximated: a mapping was made, but it decides differently in
	// some cases the message names.
	Approximated Severity = "approximated"
	// Ignored: a setting that changes no decision (metrics, metadata).
	Ignored Severity = "ignored"
)

// Finding is one construct without an exact equivalent.
type Finding struct {
	Severity Severity
	Domain   string
	// Path is the descriptor path, "database=users/shard".
	Path    string
	Message string
}

func (f Finding) String() string {
	return fmt.Sprintf("%s: domain %q, descriptor %s: %s", f.Severity, f.Domain, f.Path, f.Message)
}

// Convert turns configs into a limits file whose buckets and mappings
// belong to app (the gateway's app in Sluice), and the findings.
func Convert(configs []Config, app string) (*limitsfile.File, []Finding) {
	c := &converter{app: app, used: map[string]bool{}, f: &limitsfile.File{
		Apps: []limitsfile.App{{Name: app, Description: "gateway, imported from envoy ratelimit configuration"}}}}
	for _, cfg := range configs {
		c.domain = cfg.Domain
		c.limited, c.unlimited, c.zero = nil, nil, nil
		c.walk(nil, cfg.Descriptors)
		c.checkUnlimited()
	}
	c.f.Sort()
	return c.f, c.findings
}

type entry struct{ key, value string }

type converter struct {
	app      string
	domain   string
	f        *limitsfile.File
	findings []Finding
	used     map[string]bool
	// limited are the limited paths of the current domain, and unlimited
	// the unlimited ones, for the check that an unlimited descriptor has
	// no less specific limited sibling.
	limited, unlimited [][]entry
	// zero are the paths limited to 0 requests.
	zero [][]entry
}

func (c *converter) find(sev Severity, path []entry, format string, args ...any) {
	c.findings = append(c.findings, Finding{Severity: sev, Domain: c.domain, Path: pathText(path), Message: fmt.Sprintf(format, args...)})
}

func pathText(path []entry) string {
	parts := make([]string, len(path))
	for i, e := range path {
		parts[i] = e.key
		if e.value != "" {
			parts[i] += "=" + e.value
		}
	}
	return strings.Join(parts, "/")
}

func (c *converter) walk(parent []entry, ds []Descriptor) {
	for _, d := range ds {
		path := append(append([]entry(nil), parent...), entry{d.Key, d.Value})
		if d.Key == "" {
			c.find(Unmapped, path, "a descriptor without a key (envoy ratelimit refuses it too)")
			continue
		}
		c.node(path, d)
		c.walk(path, d.Descriptors)
	}
}

// units are envoy ratelimit's units in seconds (its UnitToDivider).
var units = map[string]int64{
	"second": 1, "minute": 60, "hour": 3600, "day": 86400,
	"week": 7 * 86400, "month": 30 * 86400, "year": 365 * 86400,
}

func (c *converter) node(path []entry, d Descriptor) {
	if d.DetailedMetric || d.ValueToMetric {
		c.find(Ignored, path, "detailed_metric and value_to_metric name metrics per descriptor value; Sluice's metrics are per bucket (the console's top keys show a keyed bucket's busiest values); decisions are unaffected")
	}
	if len(d.Metadata) > 0 {
		c.find(Ignored, path, "metadata is not carried over (it does not affect decisions)")
	}
	rl := d.RateLimit
	if rl == nil {
		if d.ShadowMode || d.QuotaMode {
			c.find(Ignored, path, "shadow_mode or quota_mode on a descriptor without rate_limit has no effect")
		}
		return
	}
	if len(rl.Replaces) > 0 {
		var names []string
		for _, r := range rl.Replaces {
			names = append(names, r.Name)
		}
		c.find(Approximated, path, "replaces %s: Sluice has no replacement between limits; where a request carries both descriptors, the replaced limit still applies as well", strings.Join(names, ", "))
	}
	if d.QuotaMode {
		c.find(Approximated, path, "quota_mode has no equivalent; imported as an ordinary limit")
	}
	if rl.Unlimited {
		c.unlimited = append(c.unlimited, path)
		return
	}
	e := make([]limitsfile.Entry, len(path))
	var anyValue []string
	for i, p := range path {
		e[i] = limitsfile.Entry{Key: p.key, Value: p.value}
		switch {
		case p.value == "":
			anyValue = append(anyValue, p.key)
		case p.value == "*" && d.ShareThreshold && i == len(path)-1:
			e[i].Value = "" // every value shares the one limit: unkeyed
		case p.value == "*":
			e[i].Value = ""
			anyValue = append(anyValue, p.key)
		case strings.Contains(p.value, "*"):
			c.find(Unmapped, path, "the wildcard value %q has no equivalent: a mapping's value matches exactly or any value", p.value)
			return
		}
	}
	if rl.RequestsPerUnit == 0 {
		c.zero = append(c.zero, path)
		return
	}
	secs, ok := units[strings.ToLower(rl.Unit)]
	if !ok {
		c.find(Unmapped, path, "unknown unit %q", rl.Unit)
		return
	}
	if int64(rl.RequestsPerUnit) > buckets.MaxCapacity {
		c.find(Unmapped, path, "requests_per_unit %d is more than a bucket's largest capacity, %d", rl.RequestsPerUnit, buckets.MaxCapacity)
		return
	}
	rate, err := buckets.ParseRate(fmt.Sprintf("%d/%ds", rl.RequestsPerUnit, secs))
	if err != nil {
		c.find(Unmapped, path, "the limit %d per %s is not a Sluice rate: %v", rl.RequestsPerUnit, rl.Unit, err)
		return
	}
	keyFrom := ""
	if len(anyValue) > 0 {
		keyFrom = anyValue[len(anyValue)-1]
		if len(anyValue) > 1 {
			c.find(Approximated, path, "each combination of values of %s gets its own limit in envoy ratelimit; a Sluice bucket is keyed by one entry, so the bucket is keyed by %q and the other values share its limits",
				strings.Join(anyValue, ", "), keyFrom)
		}
	}
	// What the mapping's own rules refuse (a value with spaces, a text
	// over 255 bytes) cannot be matched by Sluice.
	probe := &descriptors.Mapping{App: c.app, Domain: c.domain, Entries: make([]descriptors.Entry, len(e)), Bucket: "probe", KeyFrom: keyFrom}
	for i, x := range e {
		probe.Entries[i] = descriptors.Entry{Key: x.Key, Value: x.Value}
	}
	if err := probe.Validate(); err != nil {
		var reasons []string
		for _, fe := range errs.Fields(err).Fields {
			reasons = append(reasons, fe.Field+" "+fe.Reason)
		}
		c.find(Unmapped, path, "a Sluice mapping cannot match this descriptor: %s", strings.Join(reasons, "; "))
		return
	}
	c.limited = append(c.limited, path)
	name := c.bucketName(rl.Name, path)
	desc := fmt.Sprintf("envoy ratelimit domain %s, descriptor %s: %d per %s", c.domain, pathText(path), rl.RequestsPerUnit, strings.ToLower(rl.Unit))
	if len(desc) > 500 {
		desc = desc[:500]
	}
	c.f.Buckets = append(c.f.Buckets, limitsfile.Bucket{Name: name, OwnerApp: c.app, Description: desc,
		MaxPermits: int64(rl.RequestsPerUnit), Rate: rate.String(), AllowedApps: []string{c.app},
		Keyed: keyFrom != "", Shadow: d.ShadowMode})
	c.f.Mappings = append(c.f.Mappings, limitsfile.Mapping{App: c.app, Domain: c.domain, Entries: e, Bucket: name, KeyFrom: keyFrom})
}

// fallback says what Sluice does with a descriptor that has no mapping of
// its own.
func (c *converter) fallback(path []entry) string {
	for _, l := range c.limited {
		if covers(l, path) {
			return fmt.Sprintf("Sluice applies the less specific limit of %s to it instead", pathText(l))
		}
	}
	return "a descriptor that matches no mapping is decided by the decision service's unmatched setting (allow by default)"
}

// checkUnlimited reports each unlimited descriptor that a less specific
// limited one would catch in Sluice; the others need no mapping, since an
// unmatched descriptor is allowed by default.
func (c *converter) checkUnlimited() {
	for _, z := range c.zero {
		c.find(Unmapped, z, "requests_per_unit 0 (refuse every request) has no equivalent: a bucket's rate is more than 0; %s", c.fallback(z))
	}
	for _, u := range c.unlimited {
		caught := false
		for _, l := range c.limited {
			if covers(l, u) {
				c.find(Unmapped, u, "unlimited has no equivalent when a less specific descriptor is limited: Sluice applies the limit of %s to it", pathText(l))
				caught = true
				break
			}
		}
		if !caught {
			c.find(Ignored, u, "unlimited: no mapping is made; the decision service allows descriptors that match no mapping (its default unmatched setting)")
		}
	}
}

// covers reports whether a mapping made from general would match the
// descriptors of specific: same length and keys, and each value of
// general empty (any) or equal.
func covers(general, specific []entry) bool {
	if len(general) != len(specific) {
		return false
	}
	for i := range general {
		g, s := general[i], specific[i]
		if g.key != s.key || (g.value != "" && g.value != "*" && g.value != s.value) {
			return false
		}
	}
	return true
}

// bucketName makes a valid, unused bucket name from the limit's name or
// the domain and path.
func (c *converter) bucketName(given string, path []entry) string {
	base := given
	if base == "" {
		parts := []string{c.domain}
		for _, e := range path {
			p := e.key
			if e.value != "" {
				p += "-" + e.value
			}
			parts = append(parts, p)
		}
		base = strings.Join(parts, ".")
	}
	name := clean(base)
	if len(name) > 63 || !names.Valid(name) {
		sum := sha256.Sum256([]byte(c.domain + "\x00" + base))
		name = strings.TrimRight(name[:min(len(name), 54)], ".-_") + "-" + hex.EncodeToString(sum[:])[:8]
	}
	for i := 2; c.used[name]; i++ {
		suffix := fmt.Sprintf("-%d", i)
		trimmed := name
		if len(trimmed)+len(suffix) > 63 {
			trimmed = trimmed[:63-len(suffix)]
		}
		candidate := trimmed + suffix
		if !c.used[candidate] {
			name = candidate
		}
	}
	c.used[name] = true
	return name
}

// clean lower-cases s and replaces what a name may not hold by '-'.
func clean(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	out := strings.Trim(b.String(), "-._")
	if out == "" {
		out = "limit"
	}
	return out
}
