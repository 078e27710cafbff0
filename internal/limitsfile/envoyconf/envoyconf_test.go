package envoyconf_test

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/limitsfile"
	"github.com/sluicehq/sluice/internal/limitsfile/envoyconf"
)

// The cases restate, in configurations of our own, what envoyproxy/ratelimit's
// README and example configuration document: plain and nested descriptors,
// any-value keys, the most specific match, per-level matching, unlimited,
// shadow mode, replaces, detailed metrics, wildcards, several domains in
// one file, and every unit.
var cases = []struct {
	name   string
	config string
	// mappings wants each mapping made, as "domain:path -> rate [keyed by X] [shadow]".
	mappings []string
	// findings wants a substring of each finding, in order.
	findings []string
}{
	{
		name: "two fixed values",
		config: `
domain: db_calls
descriptors:
  - key: database
    value: accounts
    rate_limit: {unit: second, requests_per_unit: 300}
  - key: database
    value: reports
    rate_limit: {unit: second, requests_per_unit: 20}
`,
		mappings: []string{`db_calls:database="accounts" -> 300/s`, `db_calls:database="reports" -> 20/s`},
	},
	{
		name: "nested placeholder and any value",
		config: `
domain: sms
descriptors:
  - key: kind
    value: promo
    descriptors:
      - key: recipient
        rate_limit: {unit: day, requests_per_unit: 3}
  - key: recipient
    rate_limit: {unit: day, requests_per_unit: 50}
`,
		mappings: []string{`sms:kind="promo",recipient=* -> 3/day keyed by recipient`, `sms:recipient=* -> 50/day keyed by recipient`},
	},
	{
		name: "most specific match with a blocked value",
		config: `
domain: edge
descriptors:
  - key: client_ip
    rate_limit: {unit: second, requests_per_unit: 25}
  - key: client_ip
    value: 203.0.113.9
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: client_ip
    value: 203.0.113.10
    rate_limit: {unit: second, requests_per_unit: 1000}
`,
		mappings: []string{`edge:client_ip="203.0.113.10" -> 1000/s`, `edge:client_ip=* -> 25/s keyed by client_ip`},
		findings: []string{`unmapped: domain "edge", descriptor client_ip=203.0.113.9: requests_per_unit 0`, "less specific limit of client_ip"},
	},
	{
		name: "a limit only at the depth of its path",
		config: `
domain: levels
descriptors:
  - key: tenant
    value: acme
    rate_limit: {unit: minute, requests_per_unit: 600}
    descriptors:
      - key: route
        rate_limit: {unit: minute, requests_per_unit: 60}
`,
		mappings: []string{`levels:tenant="acme",route=* -> 60/min keyed by route`, `levels:tenant="acme" -> 600/min`},
	},
	{
		name: "unlimited alone and under a limited sibling",
		config: `
domain: internal
descriptors:
  - key: directory
    rate_limit: {unlimited: true}
  - key: storage
    rate_limit: {unit: hour, requests_per_unit: 5000}
  - key: storage
    value: backup
    rate_limit: {unlimited: true}
`,
		mappings: []string{`internal:storage=* -> 5000/h keyed by storage`},
		findings: []string{`ignored: domain "internal", descriptor directory: unlimited: no mapping`,
			`unmapped: domain "internal", descriptor storage=backup: unlimited has no equivalent`},
	},
	{
		name: "shadow mode",
		config: `
domain: auth
descriptors:
  - key: service
    descriptors:
      - key: user
        value: alice
        shadow_mode: true
        rate_limit: {unit: second, requests_per_unit: 10}
      - key: user
        value: bob
        rate_limit: {unit: second, requests_per_unit: 20}
`,
		mappings: []string{`auth:service=*,user="alice" -> 10/s keyed by service shadow`, `auth:service=*,user="bob" -> 20/s keyed by service`},
	},
	{
		name: "replaces and names",
		config: `
domain: replace
descriptors:
  - key: team
    value: red
    descriptors:
      - key: user
        value: carol
        rate_limit: {name: carol_base, unit: second, requests_per_unit: 5}
  - key: team
    value: blue
    descriptors:
      - key: user
        value: carol
        rate_limit:
          unit: second
          requests_per_unit: 10
          replaces: [{name: carol_base}]
`,
		mappings: []string{`replace:team="blue",user="carol" -> 10/s`, `replace:team="red",user="carol" -> 5/s`},
		findings: []string{`approximated: domain "replace", descriptor team=blue/user=carol: replaces carol_base`},
	},
	{
		name: "detailed metric, value to metric, several any-value keys",
		config: `
domain: metrics
descriptors:
  - key: api_key
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 100}
  - key: route
    value_to_metric: true
    descriptors:
      - key: method
        descriptors:
          - key: subject
            rate_limit: {unit: minute, requests_per_unit: 60}
`,
		mappings: []string{`metrics:api_key=* -> 100/min keyed by api_key`, `metrics:route=*,method=*,subject=* -> 60/min keyed by subject`},
		findings: []string{`ignored: domain "metrics", descriptor api_key: detailed_metric`,
			`ignored: domain "metrics", descriptor route: detailed_metric`,
			`approximated: domain "metrics", descriptor route/method/subject: each combination of values of route, method, subject`},
	},
	{
		name: "wildcards",
		config: `
domain: wild
descriptors:
  - key: path
    value: /files/*
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: bucket
    value: "*"
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 30}
  - key: tenant
    value: "*"
    rate_limit: {unit: minute, requests_per_unit: 40}
`,
		mappings: []string{`wild:bucket=* -> 30/min`, `wild:tenant=* -> 40/min keyed by tenant`},
		findings: []string{`unmapped: domain "wild", descriptor path=/files/*: the wildcard value "/files/*"`},
	},
	{
		name: "several domains and every unit",
		config: `
domain: units
descriptors:
  - {key: s, rate_limit: {unit: second, requests_per_unit: 1}}
  - {key: m, rate_limit: {unit: MINUTE, requests_per_unit: 2}}
  - {key: h, rate_limit: {unit: hour, requests_per_unit: 3}}
  - {key: d, rate_limit: {unit: day, requests_per_unit: 4}}
  - {key: w, rate_limit: {unit: week, requests_per_unit: 5}}
  - {key: mo, rate_limit: {unit: month, requests_per_unit: 6}}
  - {key: y, rate_limit: {unit: year, requests_per_unit: 7}}
  - {key: f, rate_limit: {unit: fortnight, requests_per_unit: 8}}
---
domain: second_domain
descriptors:
  - key: generic_key
    value: checkout
    rate_limit: {unit: second, requests_per_unit: 50}
`,
		mappings: []string{`second_domain:generic_key="checkout" -> 50/s`, `units:d=* -> 4/day keyed by d`, `units:h=* -> 3/h keyed by h`,
			`units:m=* -> 2/min keyed by m`, `units:mo=* -> 6/30day keyed by mo`, `units:s=* -> 1/s keyed by s`,
			`units:w=* -> 5/7day keyed by w`, `units:y=* -> 7/365day keyed by y`},
		findings: []string{`unmapped: domain "units", descriptor f: unknown unit "fortnight"`},
	},
	{
		name: "quota mode and metadata",
		config: `
domain: quota
descriptors:
  - key: service
    value: billing
    quota_mode: true
    metadata: {owner: {team: payments}}
    rate_limit: {unit: minute, requests_per_unit: 9}
`,
		mappings: []string{`quota:service="billing" -> 9/min`},
		findings: []string{"metadata is not carried over", "quota_mode has no equivalent"},
	},
}

func TestConvert(t *testing.T) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			configs, err := envoyconf.Decode(strings.NewReader(tc.config))
			if err != nil {
				t.Fatal(err)
			}
			f, findings := envoyconf.Convert(configs, "edge-gateway")
			d, err := limitsfile.Check(f, nil)
			if err != nil {
				t.Fatalf("the converted file does not check: %v", err)
			}
			var got []string
			for _, m := range d.Mappings {
				var b *limitsfile.Bucket
				for i := range f.Buckets {
					if f.Buckets[i].Name == m.Bucket {
						b = &f.Buckets[i]
					}
				}
				if b == nil || b.OwnerApp != "edge-gateway" || m.App != "edge-gateway" {
					t.Fatalf("mapping %s: bucket %q missing or not the gateway's", limitsfile.MappingID(m), m.Bucket)
				}
				if b.Keyed != (m.KeyFrom != "") {
					t.Errorf("bucket %s: keyed %t but key_from %q", b.Name, b.Keyed, m.KeyFrom)
				}
				if b.MaxPermits < 1 {
					t.Errorf("bucket %s: capacity %d", b.Name, b.MaxPermits)
				}
				s := strings.TrimPrefix(limitsfile.MappingID(m), "edge-gateway/")
				s = strings.Replace(strings.TrimSuffix(s, "]"), "[", ":", 1) + " -> " + b.Rate
				if m.KeyFrom != "" {
					s += " keyed by " + m.KeyFrom
				}
				if b.Shadow {
					s += " shadow"
				}
				got = append(got, s)
			}
			if strings.Join(got, "\n") != strings.Join(tc.mappings, "\n") {
				t.Errorf("mappings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.mappings, "\n"))
			}
			var gotFindings []string
			for _, fd := range findings {
				gotFindings = append(gotFindings, fd.String())
			}
			all := strings.Join(gotFindings, "\n")
			for _, want := range tc.findings {
				if !strings.Contains(all, want) {
					t.Errorf("findings lack %q:\n%s", want, all)
				}
			}
			if len(tc.findings) == 0 && len(findings) > 0 {
				t.Errorf("findings:\n%s\nwant %d", all, len(tc.findings))
			}
			everyLimitAccountedFor(t, configs, d, findings)
		})
	}
}

// everyLimitAccountedFor: each descriptor with a rate_limit has its
// mapping or a finding that names its path.
func everyLimitAccountedFor(t *testing.T, configs []envoyconf.Config, d *limitsfile.Desired, findings []envoyconf.Finding) {
	t.Helper()
	named := map[string]bool{}
	for _, fd := range findings {
		if fd.Severity != envoyconf.Approximated {
			named[fd.Domain+" "+fd.Path] = true
		}
	}
	mapped := map[string]bool{}
	for _, m := range d.Mappings {
		var parts []string
		for _, e := range m.Entries {
			parts = append(parts, e.Key)
		}
		mapped[m.Domain+" "+strings.Join(parts, "/")] = true
	}
	var walk func(domain string, parent []string, keys []string, ds []envoyconf.Descriptor)
	walk = func(domain string, parent, keys []string, ds []envoyconf.Descriptor) {
		for _, x := range ds {
			p := x.Key
			if x.Value != "" {
				p += "=" + x.Value
			}
			path := append(append([]string(nil), parent...), p)
			ks := append(append([]string(nil), keys...), x.Key)
			if x.RateLimit != nil {
				id := domain + " " + strings.Join(path, "/")
				if !named[id] && !mapped[domain+" "+strings.Join(ks, "/")] {
					t.Errorf("descriptor %s is neither mapped nor reported", id)
				}
			}
			walk(domain, path, ks, x.Descriptors)
		}
	}
	for _, c := range configs {
		walk(c.Domain, nil, nil, c.Descriptors)
	}
}

func TestDecodeRefuses(t *testing.T) {
	for _, bad := range []string{
		"domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, burst: 2}\n",
		"domain: a\ndescriptors:\n  - key: k\n    colour: red\n",
		"descriptors:\n  - key: k\n",
		"",
	} {
		if _, err := envoyconf.Decode(strings.NewReader(bad)); err == nil {
			t.Errorf("Decode accepts:\n%s", bad)
		}
	}
}

// TestNamesAreValidAndUnique: long and odd paths and colliding names
// still give valid, distinct bucket names.
func TestNamesAreValidAndUnique(t *testing.T) {
	config := `
domain: Very.Long_Domain-Name-That-Goes-On-And-On-For-A-While
descriptors:
  - key: header_match_with_a_long_key
    value: "Some Value/With Spaces & Symbols that is long too"
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: header_match_with_a_long_key
    value: "Some Value/With Spaces & Symbols that is long too!"
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: header_match_with_a_long_key
    value: another-long-value-that-pushes-the-name-past-sixty-three-characters
    rate_limit: {unit: second, requests_per_unit: 5}
  - key: a
    rate_limit: {name: shared, unit: second, requests_per_unit: 3}
  - key: b
    rate_limit: {name: shared, unit: second, requests_per_unit: 4}
`
	configs, err := envoyconf.Decode(strings.NewReader(config))
	if err != nil {
		t.Fatal(err)
	}
	f, findings := envoyconf.Convert(configs, "gateway")
	if _, err := limitsfile.Check(f, nil); err != nil {
		t.Fatalf("names: %v", err)
	}
	// The values with spaces cannot be matched by a mapping: reported.
	if len(f.Buckets) != 3 || len(findings) != 2 || !strings.Contains(findings[0].Message, "must not contain spaces") {
		t.Fatalf("buckets: %+v\nfindings: %v", f.Buckets, findings)
	}
	for _, b := range f.Buckets {
		if len(b.Name) > 63 {
			t.Errorf("name %q", b.Name)
		}
	}
}
