// Package names holds the one rule for app, bucket and user names, shared
// by the MySQL stores and the Redis contract so the two can never disagree.
package names

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxLen is the longest valid name.
const MaxLen = 63

// Valid reports whether s matches ^[a-z0-9][a-z0-9._-]{0,62}$. Such names
// are safe as Redis hash tags and Casbin values: no ',', '"', '*', '{', '}'
// or whitespace. It does not allocate.
func Valid(s string) bool {
	if len(s) == 0 || len(s) > MaxLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// Problem says why s is not a valid name, or returns "" when it is, in
// words fit to show next to a form field.
func Problem(s string) string {
	switch {
	case s == "":
		return "is required"
	case len(s) > MaxLen:
		return "must be at most 63 characters"
	case !Valid(s):
		return "must start with a lowercase letter or digit and contain only lowercase letters, digits, '.', '_' and '-'"
	}
	return ""
}

// LabelProblem says why s cannot be a label, the free text that names a
// token, or returns "" when it can: 1 to max characters of printable text.
func LabelProblem(s string, max int) string {
	switch {
	case strings.TrimSpace(s) == "":
		return "is required"
	case !utf8.ValidString(s):
		return "must be valid UTF-8 text"
	case utf8.RuneCountInString(s) > max:
		return fmt.Sprintf("must be at most %d characters", max)
	case strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0:
		return "must contain only printable characters"
	}
	return ""
}
