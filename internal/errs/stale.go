package errs

import "fmt"

// ErrStale: a change was based on an older version of an object than the
// stored one. It is a kind of ErrConflict that HTTPStatus answers with 412.
var ErrStale = &kindOf{msg: "stale version", parent: ErrConflict}

// kindOf is a sentinel that also matches a broader one.
type kindOf struct {
	msg    string
	parent error
}

func (k *kindOf) Error() string        { return k.msg }
func (k *kindOf) Is(target error) bool { return target == k.parent }

// Stale is the refusal of a change based on an older version of an object
// than the stored one; nothing was written. Every versioned object (a
// bucket, an override, a descriptor mapping) is refused with it, made by
// CheckVersion, so the rule, its message and its status are the same for
// all of them. It matches ErrStale and ErrConflict.
type Stale struct {
	// Object names the object in the message ("bucket \"b\"").
	Object string
	// Version is the stored version; Based the one the change was based on.
	Version, Based int64
	// Current is the object as stored (a *buckets.Bucket, ...), for a page
	// that shows the newer values.
	Current any
}

func (e *Stale) Error() string {
	return fmt.Sprintf("%s was changed by someone else (now version %d, your change was based on version %d); nothing was saved: reload it and apply your change again",
		e.Object, e.Version, e.Based)
}

// Is makes a *Stale match ErrStale and ErrConflict.
func (e *Stale) Is(target error) bool { return target == ErrStale || target == ErrConflict }

// PublicMessage says what happened and what to do, fit to show.
func (e *Stale) PublicMessage() string { return e.Error() }

// CheckVersion is the stale-version rule: a change based on version based
// of object, stored at version as current, is refused with a *Stale.
// based 0 means "whatever is stored" and passes.
func CheckVersion(object string, current any, version, based int64) error {
	if based == 0 || based == version {
		return nil
	}
	return &Stale{Object: object, Version: version, Based: based, Current: current}
}
