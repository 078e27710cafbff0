package manage

import (
	"context"
	"errors"

	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/rbac"
)

// Overrides of a keyed bucket follow its bucket's permissions: whoever
// sees the bucket reads them; changing them needs the owner role on the
// bucket's owner app. The store audits every change.

// OverrideQuery selects overrides of one bucket for ListOverrides.
type OverrideQuery struct {
	// Search keeps overrides whose key starts with it.
	Search string
	// Match keeps only "exact" or only "prefix" overrides; "" keeps both.
	Match string
	After string
	Limit int
}

// ListOverrides returns one page of the overrides of a keyed bucket the
// caller may see. A bucket that is not keyed is a field error on bucket.
func (s *Service) ListOverrides(ctx context.Context, c Caller, bucket string, q OverrideQuery) (buckets.OverridePage, error) {
	b, err := s.bucketFor(ctx, c, bucket, rbac.ActionView)
	if err != nil {
		return buckets.OverridePage{}, err
	}
	return s.buckets.ListOverrides(ctx, b.Name, buckets.OverrideFilter{Search: q.Search, Match: buckets.Match(q.Match),
		After: q.After, Limit: q.Limit})
}

// OverrideView is an override as its reader may see it.
type OverrideView struct {
	*buckets.Override
	// CanEdit tells whether the caller may change or delete it.
	CanEdit bool
}

// Override returns override id of a bucket the caller may see.
func (s *Service) Override(ctx context.Context, c Caller, bucket string, id int64) (*OverrideView, error) {
	b, err := s.bucketFor(ctx, c, bucket, rbac.ActionView)
	if err != nil {
		return nil, err
	}
	o, err := s.override(ctx, b, id)
	if err != nil {
		return nil, err
	}
	return &OverrideView{Override: o, CanEdit: s.can(c, b.OwnerApp, rbac.ActionEdit)}, nil
}

// EditableOverride returns override id and its bucket if the caller may
// change it (an edit form, a delete confirmation): the bucket says what
// kind of limit the override sets, without reading it again.
func (s *Service) EditableOverride(ctx context.Context, c Caller, bucket string, id int64) (*buckets.Bucket, *buckets.Override, error) {
	b, err := s.bucketFor(ctx, c, bucket, rbac.ActionEdit)
	if err != nil {
		return nil, nil, err
	}
	o, err := s.override(ctx, b, id)
	if err != nil {
		return nil, nil, err
	}
	return b, o, nil
}

func (s *Service) override(ctx context.Context, b *buckets.Bucket, id int64) (*buckets.Override, error) {
	o, err := s.buckets.GetOverride(ctx, b.Name, id)
	if errors.Is(err, errs.ErrNotFound) {
		return nil, errs.NotFoundf("bucket %q has no override %d", b.Name, id)
	}
	if o != nil {
		o.Kind = b.Kind // whether it has a rate, as the Store sets it on a write
	}
	return o, err
}

// OverridePatch carries the settable fields of an override as a request
// gives them; nil means "not given".
type OverridePatch struct {
	// Match is "exact" or "prefix"; with Key, fixed at creation.
	Match       *string
	Key         *string
	Description *string
	MaxPermits  *int64
	// Rate is the rate's text ("100/min").
	Rate *string
	// Shadow puts the override's keys in shadow mode.
	Shadow *bool
	// Problems are fields the transport could not parse.
	Problems errs.Validation
}

// Apply copies the given fields onto o, then validates o. Every problem is
// reported at once, those of the transport first.
func (p *OverridePatch) Apply(o *buckets.Override) error {
	if p.Match != nil {
		o.Match = buckets.Match(*p.Match)
	}
	set(&o.Key, p.Key)
	set(&o.Description, p.Description)
	set(&o.MaxPermits, p.MaxPermits)
	set(&o.Shadow, p.Shadow)
	return checkPatch(p.Problems, &o.Rate, p.Rate, o.Validate)
}

// CreateOverride gives some keys of a keyed bucket another limit.
type CreateOverride struct {
	Bucket string
	Fields OverridePatch
}

// CreateOverride needs the owner role on the bucket's owner app.
func (s *Service) CreateOverride(ctx context.Context, c Caller, req CreateOverride) (*buckets.Override, error) {
	b, err := s.bucketFor(ctx, c, req.Bucket, rbac.ActionEdit)
	if err != nil {
		return nil, err
	}
	o := &buckets.Override{Bucket: b.Name, Kind: b.Kind}
	if err := req.Fields.Apply(o); err != nil {
		return nil, err
	}
	if err := s.buckets.CreateOverride(ctx, c.Actor(), o); err != nil {
		return nil, err
	}
	return o, nil
}

// UpdateOverride changes the description and limit of an override.
type UpdateOverride struct {
	Bucket string
	ID     int64
	// Version is the version the change is based on; 0 means whatever
	// version is current.
	Version int64
	// Replace resets the fields not given (empty description; capacity
	// and rate are then required). Match and key may be given but cannot
	// change.
	Replace bool
	Fields  OverridePatch
}

// OverrideChange is the outcome of a change.
type OverrideChange struct {
	Override *buckets.Override
	// Changed is false when the request changed nothing.
	Changed bool
}

// UpdateOverride needs the owner role on the bucket's owner app.
func (s *Service) UpdateOverride(ctx context.Context, c Caller, req UpdateOverride) (OverrideChange, error) {
	b, err := s.bucketFor(ctx, c, req.Bucket, rbac.ActionEdit)
	if err != nil {
		return OverrideChange{}, err
	}
	cur, err := s.override(ctx, b, req.ID)
	if err != nil {
		return OverrideChange{}, err
	}
	if err := cur.CheckVersion(req.Version); err != nil {
		return OverrideChange{}, err
	}
	o := *cur
	if req.Replace {
		o = buckets.Override{ID: cur.ID, Bucket: cur.Bucket, Match: cur.Match, Key: cur.Key}
	}
	o.Kind = b.Kind
	o.Version = cur.Version
	if err := req.Fields.Apply(&o); err != nil {
		return OverrideChange{}, err
	}
	if err := o.CheckFixed(cur); err != nil {
		return OverrideChange{}, err
	}
	if o.Description == cur.Description && o.MaxPermits == cur.MaxPermits && o.Rate == cur.Rate && o.Shadow == cur.Shadow {
		return OverrideChange{Override: cur}, nil
	}
	if err := s.buckets.UpdateOverride(ctx, c.Actor(), &o); err != nil {
		return OverrideChange{}, err
	}
	return OverrideChange{Override: &o, Changed: true}, nil
}

// DeleteOverride removes an override: its keys get the bucket's limit
// again (or a less specific override's).
type DeleteOverride struct {
	Bucket string
	ID     int64
	// Version is the version the caller saw; 0 means whatever is current.
	Version int64
}

// DeleteOverride needs the owner role on the bucket's owner app.
func (s *Service) DeleteOverride(ctx context.Context, c Caller, req DeleteOverride) error {
	b, err := s.bucketFor(ctx, c, req.Bucket, rbac.ActionEdit)
	if err != nil {
		return err
	}
	cur, err := s.override(ctx, b, req.ID)
	if err != nil {
		return err
	}
	if err := cur.CheckVersion(req.Version); err != nil {
		return err
	}
	err = s.buckets.DeleteOverride(ctx, c.Actor(), b.Name, cur.ID, cur.Version)
	if errors.Is(err, errs.ErrNotFound) {
		return errs.NotFoundf("bucket %q has no override %d", b.Name, req.ID)
	}
	return err
}
