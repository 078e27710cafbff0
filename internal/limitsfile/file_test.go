package limitsfile_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	yaml "go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/internal/limitsfile"
)

func schema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	s, err := c.Compile(filepath.Join("..", "..", "docs", "limits.schema.json"))
	if err != nil {
		t.Fatalf("compile the schema: %v", err)
	}
	return s
}

// asJSON reads YAML text as the JSON value a schema validator checks.
func asJSON(t *testing.T, text []byte) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal(text, &v); err != nil {
		t.Fatal(err)
	}
	j, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestExamplesCheck: every limits file the repository shows passes the
// schema and the domain's checks.
func TestExamplesCheck(t *testing.T) {
	s := schema(t)
	for _, p := range []string{"examples/limits/limits.yaml", "deploy/examples/istio-limits.yaml"} {
		data, err := os.ReadFile(filepath.Join("..", "..", p))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(asJSON(t, data)); err != nil {
			t.Errorf("%s: schema: %v", p, err)
		}
		f, lines, err := limitsfile.Decode(bytes.NewReader(data))
		if err == nil {
			_, err = limitsfile.Check(f, lines)
		}
		if err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

func readExample(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "examples", "limits", "limits.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestSchemaAgreesWithTheFile: the schema accepts the example and an
// export of it (with versions), and refuses an unknown field, as Decode
// does.
func TestSchemaAgreesWithTheFile(t *testing.T) {
	s := schema(t)
	example := readExample(t)
	if err := s.Validate(asJSON(t, example)); err != nil {
		t.Fatalf("the schema refuses the example: %v", err)
	}
	f, lines, err := limitsfile.Decode(bytes.NewReader(example))
	if err != nil {
		t.Fatal(err)
	}
	d, err := limitsfile.Check(f, lines)
	if err != nil {
		t.Fatalf("the example does not check: %v", err)
	}
	for _, b := range d.Buckets {
		b.Version = 3
	}
	var out bytes.Buffer
	if err := limitsfile.Encode(&out, limitsfile.ToFile(d, true, nil), "exported"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "version: 3") {
		t.Fatalf("versions not written:\n%s", out.String())
	}
	if err := s.Validate(asJSON(t, out.Bytes())); err != nil {
		t.Fatalf("the schema refuses an export: %v\n%s", err, out.String())
	}
	// What the file says survives an export: decoding it again gives the
	// same objects.
	f2, _, err := limitsfile.Decode(&out)
	if err != nil {
		t.Fatal(err)
	}
	f.Sort()
	if len(f2.Buckets) != len(f.Buckets) || len(f2.Buckets[1].Overrides) != 2 || len(f2.Mappings) != 2 {
		t.Fatalf("round trip lost objects: %+v", f2)
	}

	for _, bad := range []string{
		"apps: []\ncolour: red\n",
		"apps:\n  - name: a\n    colour: red\n",
		"apps: [{name: a}]\nbuckets:\n  - {name: b, owner_app: a, max_permits: 1, rate: 1/s, burst: 3}\n",
		"apps: [{name: a}]\nmappings:\n  - {app: a, domain: d, entries: [{key: k, val: v}], bucket: b}\n",
	} {
		if err := s.Validate(asJSON(t, []byte(bad))); err == nil {
			t.Errorf("the schema accepts an unknown field:\n%s", bad)
		}
		if _, _, err := limitsfile.Decode(strings.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "not found") {
			t.Errorf("Decode accepts an unknown field (%v):\n%s", err, bad)
		}
	}
}

// TestCheckUsesTheDomainRules: the console's validators answer, with the
// line of the object.
func TestCheckUsesTheDomainRules(t *testing.T) {
	text := `apps:
  - name: Bad Name
buckets:
  - name: b
    owner_app: a
    max_permits: 1
    rate: 1/s
    lease_ms: 5
    reserve: 1
    overrides:
      - {match: fuzzy, key: k, max_permits: 1, rate: 1/s}
mappings:
  - app: a
    domain: edge
    entries: [{key: ip, value: x}]
    bucket: b
    key_from: ip
`
	f, lines, err := limitsfile.Decode(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	_, err = limitsfile.Check(f, lines)
	got := err.Error()
	for _, want := range []string{
		`line 2: app "Bad Name": name `,
		`line 4: bucket "b": lease_ms must be 0 (off)`,
		`line 4: bucket "b": reserve must be less than max_permits (1)`,
		`line 4: bucket "b": owner_app "a" is not one of the file's apps`,
		`line 4: bucket "b": overrides need a keyed bucket`,
		`line 11: bucket "b": override fuzzy "k": match must be "exact" or "prefix"`,
		`line 13: mapping a/edge[ip="x"]: key_from entry "ip" has a fixed value`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("Check lacks %q:\n%s", want, got)
		}
	}
}

// TestQuotaInTheFile: a quota's period and zone are checked, exported
// and accepted by the schema, which requires the period of a quota and
// refuses a calendar on other kinds.
func TestQuotaInTheFile(t *testing.T) {
	s := schema(t)
	text := `apps:
  - name: a
buckets:
  - name: monthly
    owner_app: a
    kind: quota
    max_permits: 10000
    quota_period: month
    time_zone: Europe/Berlin
`
	if err := s.Validate(asJSON(t, []byte(text))); err != nil {
		t.Fatalf("the schema refuses a quota: %v", err)
	}
	f, lines, err := limitsfile.Decode(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	d, err := limitsfile.Check(f, lines)
	if err != nil {
		t.Fatal(err)
	}
	if b := d.Buckets[0]; b.QuotaPeriod != "month" || b.TimeZone != "Europe/Berlin" {
		t.Fatalf("checked quota %+v", b)
	}
	var out bytes.Buffer
	if err := limitsfile.Encode(&out, limitsfile.ToFile(d, false, nil), "exported"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "quota_period: month") || !strings.Contains(out.String(), "time_zone: Europe/Berlin") {
		t.Fatalf("export lost the calendar:\n%s", out.String())
	}
	for _, bad := range []string{
		strings.Replace(text, "    quota_period: month\n", "", 1),
		strings.Replace(text, "kind: quota", "kind: concurrency", 1),
	} {
		if err := s.Validate(asJSON(t, []byte(bad))); err == nil {
			t.Errorf("the schema accepts:\n%s", bad)
		}
	}
	f, lines, err = limitsfile.Decode(strings.NewReader(strings.Replace(text, "Europe/Berlin", "Europe/Atlantis", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := limitsfile.Check(f, lines); err == nil || !strings.Contains(err.Error(), "time_zone") {
		t.Fatalf("an unknown zone: %v", err)
	}
}

// TestSlotLeaseTimeInTheFile: a concurrency limit's slot_ms is checked
// by the domain's rule, 30000 when left out, and a token bucket has none.
func TestSlotLeaseTimeInTheFile(t *testing.T) {
	text := `apps:
  - name: a
buckets:
  - {name: jobs, owner_app: a, kind: concurrency, max_permits: 3}
  - {name: fast, owner_app: a, kind: concurrency, max_permits: 3, slot_ms: 5}
  - {name: plain, owner_app: a, max_permits: 3, rate: 1/s, slot_ms: 1000}
`
	f, lines, err := limitsfile.Decode(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	_, err = limitsfile.Check(f, lines)
	if err == nil {
		t.Fatal("a bad slot_ms passed")
	}
	for _, want := range []string{`line 5: bucket "fast": slot_ms must be a whole number of milliseconds from 10`,
		`line 6: bucket "plain": slot_ms must be empty`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Check lacks %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), `"jobs"`) {
		t.Errorf("a concurrency limit without slot_ms is refused: %v", err)
	}
	f.Buckets = f.Buckets[:1]
	d, err := limitsfile.Check(f, lines)
	if err != nil || d.Buckets[0].SlotMillis != 30_000 {
		t.Fatalf("the default slot lease time: %+v %v", d, err)
	}
	if err := schema(t).Validate(asJSON(t, []byte(text))); err == nil {
		t.Error("the schema accepts slot_ms 5 and slot_ms on a token bucket")
	}
}
