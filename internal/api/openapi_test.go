package api

import (
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/redisscript/limits"
	"github.com/sluicehq/sluice/internal/router"
)

type openAPIOperation struct {
	Security   *[]map[string][]string    `json:"security"`
	Parameters []map[string]any          `json:"parameters"`
	Responses  map[string]map[string]any `json:"responses"`
}

func loadOpenAPI(t *testing.T) (map[string]any, map[string]map[string]json.RawMessage) {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(openAPIDoc, &doc); err != nil {
		t.Fatalf("openapi.json is not JSON: %v", err)
	}
	var paths struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(openAPIDoc, &paths); err != nil {
		t.Fatal(err)
	}
	return doc, paths.Paths
}

var httpMethods = []string{"get", "put", "post", "delete", "patch", "head", "options", "trace"}

// TestOpenAPIMatchesRoutes keeps the document true: every registered route
// is described, and every described operation is registered.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	doc, paths := loadOpenAPI(t)
	if v, _ := doc["openapi"].(string); !strings.HasPrefix(v, "3.") {
		t.Fatalf("openapi version = %q, want 3.x", v)
	}

	registered := map[string]route{}
	for _, rt := range (&server{}).routes() {
		key := strings.ToLower(rt.method) + " " + rt.path
		if _, dup := registered[key]; dup {
			t.Errorf("route %s registered twice", key)
		}
		registered[key] = rt
	}
	described := map[string]openAPIOperation{}
	for path, item := range paths {
		for method, raw := range item {
			if !slices.Contains(httpMethods, method) {
				continue // "parameters", "summary", ...
			}
			var op openAPIOperation
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
			described[method+" "+path] = op
		}
	}
	for key := range registered {
		if _, ok := described[key]; !ok {
			t.Errorf("route %s is registered but not described in openapi.json", key)
		}
	}
	for key := range described {
		if _, ok := registered[key]; !ok {
			t.Errorf("openapi.json describes %s, which is not registered", key)
		}
	}
	if len(registered) < 16 {
		t.Errorf("only %d routes registered", len(registered))
	}

	// Public routes say so, and every other operation documents the 401.
	for key, op := range described {
		rt, ok := registered[key]
		if !ok {
			continue
		}
		public := op.Security != nil && len(*op.Security) == 0
		if public != rt.public {
			t.Errorf("%s: public in openapi.json = %v, in the route table = %v", key, public, rt.public)
		}
		if !rt.public {
			if _, ok := op.Responses["401"]; !ok {
				t.Errorf("%s: the 401 response is not described", key)
			}
		}
		if len(op.Responses) == 0 {
			t.Errorf("%s: no responses described", key)
		}
	}
}

// TestOpenAPIPathParameters checks that each {name} of a path is declared
// as a path parameter, so generated clients can call it.
func TestOpenAPIPathParameters(t *testing.T) {
	doc, paths := loadOpenAPI(t)
	components := doc["components"].(map[string]any)["parameters"].(map[string]any)
	placeholder := regexp.MustCompile(`\{([a-z_]+)\}`)
	for path, item := range paths {
		var declared []string
		var params []map[string]any
		if raw, ok := item["parameters"]; ok {
			if err := json.Unmarshal(raw, &params); err != nil {
				t.Fatal(err)
			}
		}
		for _, p := range params {
			if ref, ok := p["$ref"].(string); ok {
				p = components[strings.TrimPrefix(ref, "#/components/parameters/")].(map[string]any)
			}
			if p["in"] == "path" {
				declared = append(declared, p["name"].(string))
			}
		}
		for _, m := range placeholder.FindAllStringSubmatch(path, -1) {
			if !slices.Contains(declared, m[1]) {
				t.Errorf("%s: path parameter %q is not declared", path, m[1])
			}
		}
	}
}

// TestOpenAPIRefsResolve checks that every $ref points at a component.
func TestOpenAPIRefsResolve(t *testing.T) {
	doc, _ := loadOpenAPI(t)
	var refs []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if k == "$ref" {
					refs = append(refs, x.(string))
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)
	if len(refs) == 0 {
		t.Fatal("no $ref found")
	}
	for _, ref := range refs {
		parts := strings.Split(strings.TrimPrefix(ref, "#/"), "/")
		var node any = doc
		for _, p := range parts {
			m, ok := node.(map[string]any)
			if !ok {
				node = nil
				break
			}
			node = m[p]
		}
		if node == nil {
			t.Errorf("$ref %q does not resolve", ref)
		}
	}
}

// TestRoutePatternsParse registers the table on a fresh router: a path gin
// rejects or a clash between two routes panics here, not in main.
func TestRoutePatternsParse(t *testing.T) {
	for _, rt := range (&server{}).routes() {
		if !strings.HasPrefix(rt.path, Prefix+"/") {
			t.Errorf("route %s %s is not under %s", rt.method, rt.path, Prefix)
		}
	}
	rt, err := router.New(router.Config{})
	if err != nil {
		t.Fatal(err)
	}
	Mount(rt, Config{})
	if got, want := len(rt.Engine().Routes()), len((&server{}).routes()); got != want {
		t.Fatalf("%d routes registered, want %d", got, want)
	}
}

// TestOpenAPILimits: the document states the capacity limit the stores
// enforce.
func TestOpenAPILimits(t *testing.T) {
	want := `"maximum": ` + strconv.Itoa(limits.MaxCapacity)
	if n := strings.Count(string(openAPIDoc), want); n < 2 {
		t.Fatalf("openapi.json states %s %d times, want it on every max_permits", want, n)
	}
}

// The document states the visibility decision of docs/decisions.md: 404
// hides what an invisible object holds, not that its name exists (a taken
// name answers 409 whoever holds it).
func TestOpenAPIStatesTheVisibilityDecision(t *testing.T) {
	doc, _ := loadOpenAPI(t)
	info, _ := doc["info"].(map[string]any)
	desc, _ := info["description"].(string)
	if strings.Contains(desc, "names do not leak") {
		t.Error("openapi.json says names do not leak; a taken name answers 409 whoever holds it")
	}
	for _, want := range []string{"answers `404`, exactly like one that does not exist", "answers `403`",
		"Names themselves are not secret", "`409`"} {
		if !strings.Contains(desc, want) {
			t.Errorf("openapi.json's description lacks %q", want)
		}
	}
}
