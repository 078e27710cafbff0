package database

import "strings"

// LikeContains is the LIKE pattern, with '!' as the escape character
// (ESCAPE '!'), of values containing s as typed: its "%" and "_" match
// themselves.
func LikeContains(s string) string {
	return "%" + strings.NewReplacer("!", "!!", "%", "!%", "_", "!_").Replace(s) + "%"
}
