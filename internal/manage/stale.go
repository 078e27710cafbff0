package manage

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/errs"
)

// versioned are the objects whose changes say which version they are
// based on, and are refused when another was saved since.
type versioned interface {
	*buckets.Bucket | *buckets.Override
}

// StaleError is the conflict of a change based on an older version of an
// object, a bucket or an override, than the stored one. Nothing was
// written.
type StaleError[T versioned] struct {
	// Current is the object as stored now.
	Current T
	// Based is the version the change was based on.
	Based int64
}

func staleError[T versioned](cur T, based int64) *StaleError[T] {
	return &StaleError[T]{Current: cur, Based: based}
}

// object names the stale object up to its bucket's name ("bucket",
// "override 3 of bucket"), that name, and the object's stored version.
func (e *StaleError[T]) object() (kind, bucket string, version int64) {
	switch cur := any(e.Current).(type) {
	case *buckets.Bucket:
		return "bucket", cur.Name, cur.Version
	case *buckets.Override:
		return "override " + itoa(cur.ID) + " of bucket", cur.Bucket, cur.Version
	}
	return "", "", 0 // T allows no other type
}

func (e *StaleError[T]) Error() string {
	kind, bucket, version := e.object()
	return fmt.Sprintf("%s %q was changed by someone else (now version %d, you edited version %d); reload it and apply your change again",
		kind, bucket, version, e.Based)
}

// Is makes a StaleError match errs.ErrConflict.
func (e *StaleError[T]) Is(target error) bool { return target == errs.ErrConflict }

// PublicMessage says what happened and what to do, fit to show.
func (e *StaleError[T]) PublicMessage() string { return e.Error() }

// Stale names the object ("bucket b", "override 3 of bucket b") and gives
// its stored version and the one the change was based on, for transports
// that word the conflict their own way, whatever the object.
func (e *StaleError[T]) Stale() (object string, version, based int64) {
	kind, bucket, version := e.object()
	return kind + " " + bucket, version, e.Based
}

// staleAfter turns the store's version conflict (someone saved between our
// read and the write) into a *StaleError carrying the object as reload
// reads it now. Any other error, or a failed reload, is returned as is.
func staleAfter[T versioned](ctx context.Context, err error, based int64, reload func(context.Context) (T, error)) error {
	if !errors.Is(err, errs.ErrConflict) {
		return err
	}
	cur, rerr := reload(ctx)
	if rerr != nil {
		return err
	}
	return staleError(cur, based)
}
