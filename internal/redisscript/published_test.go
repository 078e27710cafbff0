package redisscript

import (
	"os"
	"strings"
	"testing"
)

// TestPublishedScripts checks that each stand-alone token script is byte
// for byte what the loader sends, and that docs/protocol.md gives its SHA1.
func TestPublishedScripts(t *testing.T) {
	doc, err := os.ReadFile("../../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range Published {
		if os.Getenv("SLUICE_WRITE_SCRIPTS") == "1" {
			if err := os.WriteFile(name, []byte(s.Source()), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != s.Source() {
			t.Errorf("%s differs from what the loader sends (rebuild with SLUICE_WRITE_SCRIPTS=1)", name)
		}
		if row := "| `" + name + "` | `" + s.SHA() + "` |"; !strings.Contains(string(doc), row) {
			t.Errorf("docs/protocol.md lacks the row %s", row)
		}
	}
}

// TestLuaCoreOneHome keeps each rule of the token scripts in the core
// (lua/bucket.lua, lua/keyed.lua): no script's own part refills, computes
// a wait, reads the clock, checks an app, parses an override or decides a
// key, and no part formats a number with tostring.
func TestLuaCoreOneHome(t *testing.T) {
	rules := map[string]string{
		"the rate arithmetic":     "1000000000000",
		"the clock":               "redis.call('TIME')",
		"the app check":           "',' .. app .. ','",
		"the override format":     "%d+ %d+ (%d+)",
		"the key's state format":  "([%w_-]+) ([%w_-]+)",
		"the debt rule":           "until_us(n + r - tokens",
		"the reserve rule":        "tokens - r",
		"what a reserve keeps":    "r >= capacity",
		"a key's state write":     "'PX'",
		"the count format":        "[1-9][0-9]*",
		"the limit check":         "permits <= 0",
		"the decimal state write": "'tokens', decimal(",
		"the binary state":        "struct.pack(STATE",
		"the slot purge":          "'ZREMRANGEBYSCORE'",
		"the slot write":          "'ZADD'",
		"the slot id format":      "^[%w_.:-]+$",
	}
	core := map[string]bool{"lua/bucket.lua": true, "lua/keyed.lua": true, "lua/slots.lua": true, "lua/state.lua": true}
	found := map[string]int{}
	parts, err := lua.ReadDir("lua")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range parts {
		name := "lua/" + p.Name()
		b, err := lua.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "tostring(") {
			t.Errorf("%s formats a number with tostring", name)
		}
		for rule, text := range rules {
			if n := strings.Count(string(b), text); n > 0 {
				if !core[name] {
					t.Errorf("%s has %s (%q): it belongs in the core", name, rule, text)
				}
				found[rule] += n
			}
		}
	}
	for rule := range rules {
		if found[rule] == 0 {
			t.Errorf("the core lacks %s", rule)
		}
	}
	for name, s := range Published {
		if !strings.HasPrefix(s.Source(), mustRead(t, coreBucket)) {
			t.Errorf("%s does not start with the core", name)
		}
	}
}

func mustRead(t *testing.T, name string) string {
	t.Helper()
	b, err := lua.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
