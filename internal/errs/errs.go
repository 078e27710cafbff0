// Package errs is Sluice's one error vocabulary. Stores and domain types
// wrap these sentinels; the console and the API map them to HTTP status codes
// in exactly one place each, so a new error never leaks as a 500 by accident.
package errs

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrNotFound: the named thing does not exist (or the caller may not know it exists).
	ErrNotFound = errors.New("not found")
	// ErrConflict: a name is taken, or the value changed since the caller read it.
	ErrConflict = errors.New("conflict")
	// ErrInvalid: the input breaks a rule; a *Validation says which fields and why.
	ErrInvalid = errors.New("invalid input")
	// ErrForbidden: the caller is known but lacks the role for the action.
	ErrForbidden = errors.New("forbidden")
	// ErrUnauthenticated: the caller is not signed in.
	ErrUnauthenticated = errors.New("not signed in")
	// ErrUnavailable: a store (MySQL, Redis) cannot be reached; retrying later may work.
	ErrUnavailable = errors.New("temporarily unavailable")
)

// FieldError says why one input field is invalid. Field is the name the
// input has in forms and JSON bodies ("max_permits"), Reason a sentence
// fragment fit to show next to it ("must be between 1 and 1000000000").
type FieldError struct {
	Field  string `json:"field"`
	Reason string `json:"reason"`
}

// Validation collects the field errors of one value. It matches ErrInvalid
// under errors.Is. The zero value is empty and ready to use.
type Validation struct {
	Fields []FieldError
}

// Add records that field is invalid for reason.
func (v *Validation) Add(field, reason string) {
	v.Fields = append(v.Fields, FieldError{Field: field, Reason: reason})
}

// Err returns v as an error, or nil when no field is invalid.
func (v *Validation) Err() error {
	if v == nil || len(v.Fields) == 0 {
		return nil
	}
	return v
}

// For returns the reason recorded for field, or "" when it is valid.
func (v *Validation) For(field string) string {
	if v == nil {
		return ""
	}
	for _, f := range v.Fields {
		if f.Field == field {
			return f.Reason
		}
	}
	return ""
}

func (v *Validation) Error() string {
	var b strings.Builder
	b.WriteString("invalid input")
	for i, f := range v.Fields {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(f.Field)
		b.WriteString(" ")
		b.WriteString(f.Reason)
	}
	return b.String()
}

// Is makes errors.Is(err, ErrInvalid) true for a *Validation.
func (v *Validation) Is(target error) bool { return target == ErrInvalid }

// Invalid returns a *Validation with one field error.
func Invalid(field, reason string) error {
	return &Validation{Fields: []FieldError{{Field: field, Reason: reason}}}
}

// Fields returns the field errors carried by err, if any.
func Fields(err error) *Validation {
	var v *Validation
	if errors.As(err, &v) {
		return v
	}
	return nil
}

// public is an error of one kind of the vocabulary whose message is written
// for the person or program that made the request, so that transports may
// show it as is.
type public struct {
	kind error
	msg  string
}

func (e *public) Error() string         { return e.msg }
func (e *public) Is(target error) bool  { return target == e.kind }
func (e *public) PublicMessage() string { return e.msg }

// Clip shortens user input that a message quotes to 40 characters, so
// that a long value cannot swamp the sentence around it.
func Clip(s string) string {
	if r := []rune(s); len(r) > 40 {
		return string(r[:40]) + "..."
	}
	return s
}

// Conflictf returns an error matching ErrConflict whose message, the
// formatted sentence, is fit to show as is ("a bucket named "x" already
// exists").
func Conflictf(format string, args ...any) error {
	return &public{kind: ErrConflict, msg: fmt.Sprintf(format, args...)}
}

// NotFoundf returns an error matching ErrNotFound with a message fit to
// show. It reads the same for a missing and an invisible object.
func NotFoundf(format string, args ...any) error {
	return &public{kind: ErrNotFound, msg: fmt.Sprintf(format, args...)}
}

// Forbiddenf returns an error matching ErrForbidden that says which role
// the action needs.
func Forbiddenf(format string, args ...any) error {
	return &public{kind: ErrForbidden, msg: fmt.Sprintf(format, args...)}
}

// PublicMessage returns the message of the first error in err's chain that
// was written to be shown, and whether there is one.
func PublicMessage(err error) (string, bool) {
	var p interface{ PublicMessage() string }
	if errors.As(err, &p) {
		return p.PublicMessage(), true
	}
	return "", false
}
