package database

import "strings"

// likeEscaper escapes the LIKE wildcards, and the escape character '!'
// itself, so that they match themselves.
var likeEscaper = strings.NewReplacer("!", "!!", "%", "!%", "_", "!_")

// LikeContains is the LIKE pattern, with '!' as the escape character
// (ESCAPE '!'), of values containing s as typed: its "%" and "_" match
// themselves.
func LikeContains(s string) string {
	return "%" + likeEscaper.Replace(s) + "%"
}

// LikePrefix is the LIKE pattern, with '!' as the escape character, of
// values starting with s as typed, byte for byte.
func LikePrefix(s string) string {
	return likeEscaper.Replace(s) + "%"
}
