// Package apps holds the applications registered in Sluice: the services
// that take tokens from buckets and the unit that roles are granted on.
package apps

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/redisscript/names"
)

// MaxDescription is the longest description of an app or a bucket, in characters.
const MaxDescription = 500

// App is an application registered in the console.
type App struct {
	ID          int64  `db:"id" json:"id"`
	Name        string `db:"name" json:"name"`
	Description string `db:"description" json:"description"`
	database.Stamp
}

// Validate checks the fields a user sets and returns a *errs.Validation
// naming each invalid one ("name", "description"), or nil.
func (a *App) Validate() error {
	var v errs.Validation
	if r := names.Problem(a.Name); r != "" {
		v.Add("name", r)
	}
	if r := DescriptionProblem(a.Description); r != "" {
		v.Add("description", r)
	}
	return v.Err()
}

// DescriptionProblem says why s is not a valid description, or returns ""
// when it is: at most MaxDescription characters of valid UTF-8, without
// control characters other than tab and line breaks.
func DescriptionProblem(s string) string {
	if !utf8.ValidString(s) {
		return "must be valid UTF-8 text"
	}
	if utf8.RuneCountInString(s) > MaxDescription {
		return "must be at most 500 characters"
	}
	if strings.IndexFunc(s, func(r rune) bool {
		return unicode.IsControl(r) && r != '\n' && r != '\r' && r != '\t'
	}) >= 0 {
		return "must not contain control characters"
	}
	return ""
}
