package names_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/redisscript/names"
)

var rule = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

func TestValid(t *testing.T) {
	for _, s := range []string{"a", "orders-api", "a.b_c-d", "0", strings.Repeat("a", 63)} {
		if !names.Valid(s) {
			t.Errorf("Valid(%q) = false, want true", s)
		}
	}
	for _, s := range []string{"", "-a", ".a", "_a", "A", "a b", "a,b", "a{b}", "a*", `a"`, "é", strings.Repeat("a", 64), "a\n"} {
		if names.Valid(s) {
			t.Errorf("Valid(%q) = true, want false", s)
		}
	}
}

func FuzzValidMatchesRule(f *testing.F) {
	for _, s := range []string{"a", "-a", "orders.v2", "x{y}", strings.Repeat("z", 64)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := names.Valid(s), rule.MatchString(s); got != want {
			t.Fatalf("Valid(%q) = %v, the rule says %v", s, got, want)
		}
	})
}

func FuzzProblemAgreesWithValid(f *testing.F) {
	for _, s := range []string{"shop", "a.b-c_d", "", "-x", "A", "{x}", "a b", strings.Repeat("z", 64)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if p := names.Problem(s); (p == "") != names.Valid(s) {
			t.Fatalf("Problem(%q) = %q, Valid = %v", s, p, names.Valid(s))
		}
	})
}
