package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/accounts"
	"github.com/sluicehq/sluice/internal/api"
	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/manage"
	"github.com/sluicehq/sluice/internal/rbac"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/testenv"
)

// console is a real API server on a fresh database, and a user's token.
type console struct {
	t      *testing.T
	url    string
	token  string
	db     *sqlx.DB
	rdb    *redis.Client
	prefix string
}

func newConsole(t *testing.T) *console {
	t.Helper()
	db := testenv.MySQL(t)
	rdb, prefix := testenv.Redis(t)
	ctx := context.Background()
	enf, err := rbac.New(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	accts := accounts.NewStore(db)
	accts.Hash = accounts.HashParams{Time: 1, Memory: 64, Threads: 1}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc, err := manage.New(manage.Config{DB: db, Enforcer: enf, Keyspace: redisscript.Keyspace{Prefix: prefix},
		Accounts: accts, Logger: log, Redis: rdb})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	srv := httptest.NewServer(api.New(api.Config{Service: svc, Logger: log}))
	t.Cleanup(srv.Close)
	setup := audit.Actor{User: "setup", Via: "cli"}
	u, err := accts.CreateUser(ctx, setup, "platform", "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	token, _, err := accts.CreateToken(ctx, setup, u.ID, "ci", nil)
	if err != nil {
		t.Fatal(err)
	}
	return &console{t: t, url: srv.URL, token: token, db: db, rdb: rdb, prefix: prefix}
}

// call sends one API request as the console's user and returns the
// status and the ETag.
func (c *console) call(method, path string, body any, ifMatch string) (int, string) {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		j, _ := json.Marshal(body)
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, c.url+"/api/v1"+path, rd)
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	if ifMatch != "" {
		req.Header.Set("If-Match", ifMatch)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		c.t.Logf("%s %s: %d %s", method, path, resp.StatusCode, data)
	}
	return resp.StatusCode, resp.Header.Get("ETag")
}

// tool runs sluice-limits against the console and returns its exit code,
// standard output and standard error.
func (c *console) tool(args ...string) (int, string, string) {
	c.t.Helper()
	var out, errOut bytes.Buffer
	env := map[string]string{"SLUICE_SERVER": c.url, "SLUICE_TOKEN": c.token}
	code := run(args, strings.NewReader(""), &out, &errOut, func(k string) string { return env[k] })
	return code, out.String(), errOut.String()
}

func (c *console) mustTool(want int, args ...string) string {
	c.t.Helper()
	code, out, errOut := c.tool(args...)
	if code != want {
		c.t.Fatalf("sluice-limits %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, want, out, errOut)
	}
	return out
}

func write(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// arrange makes, through the API, one of every kind of object: apps, a
// plain bucket, a keyed bucket in shadow mode with two overrides, and a
// descriptor mapping.
func (c *console) arrange() {
	c.t.Helper()
	for _, a := range []string{"checkout", "gateway"} {
		if st, _ := c.call("POST", "/apps", map[string]any{"name": a, "description": "the " + a + " service"}, ""); st != 201 {
			c.t.Fatalf("create app %s: %d", a, st)
		}
	}
	steps := []struct {
		path string
		body map[string]any
	}{
		{"/buckets", map[string]any{"name": "orders", "owner_app": "checkout", "max_permits": 100, "rate": "10/s",
			"allowed_apps": []string{"checkout", "gateway"}, "lease_ms": 100, "reserve": 5}},
		{"/buckets", map[string]any{"name": "per-ip", "owner_app": "gateway", "max_permits": 20, "rate": "0.5/s",
			"keyed": true, "shadow": true, "description": "per client address"}},
		{"/buckets/per-ip/overrides", map[string]any{"match": "exact", "key": "10.0.0.1", "max_permits": 1000, "rate": "100/s"}},
		{"/buckets/per-ip/overrides", map[string]any{"match": "prefix", "key": "192.168.", "max_permits": 50, "rate": "5/min", "shadow": true}},
		{"/apps/gateway/mappings", map[string]any{"domain": "edge", "entries": []map[string]string{{"key": "remote_address"}},
			"bucket": "per-ip", "key_from": "remote_address"}},
		{"/apps/gateway/mappings", map[string]any{"domain": "edge", "entries": []map[string]string{{"key": "path", "value": "/orders"}},
			"bucket": "orders"}},
	}
	for _, s := range steps {
		if st, _ := c.call("POST", s.path, s.body, ""); st != 201 {
			c.t.Fatalf("POST %s: %d", s.path, st)
		}
	}
}

func TestExportApplyRoundTrip(t *testing.T) {
	c := newConsole(t)
	c.arrange()

	exported := c.mustTool(0, "export")
	for _, want := range []string{"name: orders", "keyed: true", "shadow: true", "lease_ms: 100", "reserve: 5", "match: prefix",
		"key: 192.168.", "domain: edge", "key_from: remote_address", "rate: 0.5/s", "version: 1"} {
		if !strings.Contains(exported, want) {
			t.Errorf("export lacks %q:\n%s", want, exported)
		}
	}
	file := write(t, "limits.yaml", exported)

	// The exported file is the live state: nothing to do, twice.
	for i := 0; i < 2; i++ {
		if out := c.mustTool(0, "diff", "-exit-code", "-f", file); !strings.Contains(out, "No changes.") {
			t.Fatalf("diff of the export:\n%s", out)
		}
		if out := c.mustTool(0, "apply", "-f", file); !strings.Contains(out, "No changes.") {
			t.Fatalf("apply of the export:\n%s", out)
		}
	}

	// An edit of the file: diff shows it, apply makes it, then no change.
	edited := strings.Replace(exported, "rate: 10/s", "rate: 20/s", 1)
	edited = strings.Replace(edited, "max_permits: 1000\n", "max_permits: 2000\n", 1)
	edited = strings.Replace(edited, "buckets:\n", "buckets:\n  - name: search\n    owner_app: checkout\n    max_permits: 5\n    rate: 1/s\n    allowed_apps: [gateway]\n", 1)
	edited = strings.Replace(edited, "    bucket: orders\n", "    bucket: search\n", 1)
	file = write(t, "edited.yaml", edited)
	out := c.mustTool(3, "diff", "-exit-code", "-f", file)
	for _, want := range []string{`~ bucket "orders": rate: 10/s -> 20/s`, `+ bucket "search": owner_app "checkout", max_permits 5, rate 1/s, allowed_apps gateway`,
		`~ override exact "10.0.0.1" of bucket "per-ip": max_permits: 1000 -> 2000`, `~ mapping gateway/edge[path="/orders"]: bucket: "orders" -> "search"`, "1 to create, 3 to change, 0 to delete."} {
		if !strings.Contains(out, want) {
			t.Errorf("diff lacks %q:\n%s", want, out)
		}
	}
	c.mustTool(0, "diff", "-f", file) // changes without -exit-code are not a failure
	out = c.mustTool(0, "apply", "-f", file)
	if !strings.Contains(out, "Applied 4 change(s).") {
		t.Fatalf("apply:\n%s", out)
	}
	if out := c.mustTool(0, "diff", "-exit-code", "-f", file); !strings.Contains(out, "No changes.") {
		t.Fatalf("diff after apply:\n%s", out)
	}
	if out := c.mustTool(0, "apply", "-f", file); !strings.Contains(out, "No changes.") {
		t.Fatalf("second apply:\n%s", out)
	}
}

// TestConcurrentEditIsAConflict: the file carries the versions it was
// exported at; an edit made through the API after the diff is reported by
// apply, with exit code 4, and is not overwritten.
func TestConcurrentEditIsAConflict(t *testing.T) {
	c := newConsole(t)
	c.arrange()
	exported := c.mustTool(0, "export")
	file := write(t, "limits.yaml", strings.Replace(exported, "rate: 10/s", "rate: 20/s", 1))
	c.mustTool(3, "diff", "-exit-code", "-f", file)

	// Someone edits the bucket in the console meanwhile.
	if st, _ := c.call("PATCH", "/buckets/orders", map[string]any{"max_permits": 7}, `"1"`); st != 200 {
		t.Fatalf("concurrent edit: %d", st)
	}
	code, out, errOut := c.tool("apply", "-f", file)
	if code != exitConflict || !strings.Contains(out, `conflict: bucket "orders": the file is based on version 1 but it is now at version 2`) {
		t.Fatalf("apply after a concurrent edit: exit %d\n%s\n%s", code, out, errOut)
	}
	// Their edit stands.
	after := c.mustTool(0, "export")
	if !strings.Contains(after, "max_permits: 7") || !strings.Contains(after, "rate: 10/s") {
		t.Fatalf("the concurrent edit was overwritten:\n%s", after)
	}
	// Without versions, apply reads just before writing and makes the
	// file's settings true.
	c.mustTool(0, "apply", "-f", write(t, "nover.yaml", stripVersions(strings.Replace(after, "rate: 10/s", "rate: 20/s", 1))))
	if out := c.mustTool(0, "export", "-no-versions"); !strings.Contains(out, "rate: 20/s") || strings.Contains(out, "version:") {
		t.Fatalf("export -no-versions after apply:\n%s", out)
	}
}

func stripVersions(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "version:") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestPruneOnlyWithTheFlag: objects of the file's apps that the file does
// not list stay unless -prune is given; other apps are never touched.
func TestPruneOnlyWithTheFlag(t *testing.T) {
	c := newConsole(t)
	c.arrange()
	if st, _ := c.call("POST", "/apps", map[string]any{"name": "other"}, ""); st != 201 {
		t.Fatal("create app other")
	}
	if st, _ := c.call("POST", "/buckets", map[string]any{"name": "other-bucket", "owner_app": "other", "max_permits": 1, "rate": "1/s"}, ""); st != 201 {
		t.Fatal("create other-bucket")
	}
	exported := c.mustTool(0, "export", "-no-versions", "-app", "checkout,gateway")
	if strings.Contains(exported, "other") {
		t.Fatalf("export -app includes another app:\n%s", exported)
	}
	// The file without the keyed bucket, its overrides and its mapping.
	f := `apps:
  - name: checkout
    description: the checkout service
  - name: gateway
    description: the gateway service
buckets:
  - name: orders
    owner_app: checkout
    max_permits: 100
    rate: 10/s
    allowed_apps: [checkout, gateway]
    lease_ms: 100
    reserve: 5
mappings:
  - app: gateway
    domain: edge
    entries: [{key: path, value: /orders}]
    bucket: orders
`
	file := write(t, "small.yaml", f)
	out := c.mustTool(0, "apply", "-f", file)
	if !strings.Contains(out, "No changes.") || !strings.Contains(out, "2 live object(s)") {
		t.Fatalf("apply without -prune:\n%s", out)
	}
	out = c.mustTool(3, "diff", "-prune", "-exit-code", "-f", file)
	for _, want := range []string{`- mapping gateway/edge[remote_address=*]`, `- bucket "per-ip" (with its overrides)`, "0 to create, 0 to change, 2 to delete."} {
		if !strings.Contains(out, want) {
			t.Errorf("diff -prune lacks %q:\n%s", want, out)
		}
	}
	c.mustTool(0, "apply", "-prune", "-f", file)
	if out := c.mustTool(0, "diff", "-prune", "-exit-code", "-f", file); !strings.Contains(out, "No changes.") {
		t.Fatalf("after prune:\n%s", out)
	}
	if st, _ := c.call("GET", "/buckets/other-bucket", nil, ""); st != 200 {
		t.Fatalf("prune touched another app's bucket: %d", st)
	}
}

// TestInvalidFileIsRefusedBeforeAnyCall: the same validators as the
// console, with line numbers; strict decoding; usage errors exit 2.
func TestInvalidFile(t *testing.T) {
	c := &console{t: t, url: "http://127.0.0.1:1", token: "unused"}
	bad := write(t, "bad.yaml", `apps:
  - name: checkout
buckets:
  - name: orders
    owner_app: checkout
    max_permits: 0
    rate: 10/fortnight
`)
	code, _, errOut := c.tool("diff", "-f", bad)
	if code != exitError || !strings.Contains(errOut, "line 4: bucket \"orders\": max_permits must be a whole number") ||
		!strings.Contains(errOut, "rate period must be") {
		t.Fatalf("invalid file: exit %d\n%s", code, errOut)
	}
	unknown := write(t, "unknown.yaml", "apps:\n  - name: a\n    colour: red\n")
	code, _, errOut = c.tool("apply", "-f", unknown)
	if code != exitError || !strings.Contains(errOut, "line 3: field colour not found") {
		t.Fatalf("unknown field: exit %d\n%s", code, errOut)
	}
	orphan := write(t, "orphan.yaml", "apps: []\nbuckets:\n  - {name: b, owner_app: x, max_permits: 1, rate: 1/s}\n")
	code, _, errOut = c.tool("apply", "-f", orphan)
	if code != exitError || !strings.Contains(errOut, `owner_app "x" is not one of the file's apps`) {
		t.Fatalf("unmanaged owner: exit %d\n%s", code, errOut)
	}
	if code, _, _ := c.tool("apply"); code != exitUsage {
		t.Fatalf("apply without -f: exit %d", code)
	}
	if code, _, _ := c.tool("frobnicate"); code != exitUsage {
		t.Fatalf("unknown command: exit %d", code)
	}
}

// TestImportEnvoyThenApply: a converted envoy ratelimit configuration
// applies to a real console, and applying it again changes nothing; what
// has no equivalent is on standard error, and fails only with -strict.
func TestImportEnvoyThenApply(t *testing.T) {
	c := newConsole(t)
	config := write(t, "envoy.yaml", `
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: remote_address
    value: 198.51.100.7
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: path
    value: /login
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 30}
`)
	code, out, errOut := c.tool("import-envoy", "-f", config, "-app", "edge-gw")
	if code != 0 || !strings.Contains(errOut, `unmapped: domain "edge", descriptor remote_address=198.51.100.7`) {
		t.Fatalf("import-envoy: exit %d\n%s", code, errOut)
	}
	if code, _, _ := c.tool("import-envoy", "-strict", "-f", config, "-app", "edge-gw"); code != exitError {
		t.Fatalf("import-envoy -strict with an unmapped descriptor: exit %d", code)
	}
	file := write(t, "imported.yaml", out)
	applied := c.mustTool(0, "apply", "-f", file)
	if !strings.Contains(applied, "5 to create") {
		t.Fatalf("apply of the import:\n%s", applied)
	}
	c.mustTool(0, "diff", "-exit-code", "-f", file)
	exported := c.mustTool(0, "export", "-app", "edge-gw")
	for _, want := range []string{"key_from: remote_address", "shadow: true", "rate: 30/min"} {
		if !strings.Contains(exported, want) {
			t.Errorf("export after import lacks %q:\n%s", want, exported)
		}
	}
}
