package manage

import (
	"context"
	"errors"
	"slices"

	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/rbac"
	"github.com/sluicehq/sluice/internal/redisscript/quota"
)

// BucketQuery selects buckets for ListBuckets.
type BucketQuery struct {
	// Search keeps buckets whose name or description contains it.
	Search string
	// App keeps buckets owned by or allowed to this app.
	App   string
	After string
	// Before asks for the previous page, the one ending before this name.
	Before string
	Limit  int
}

// AppBuckets returns the first limit buckets app owns or may take tokens
// from, that the caller may see. A member of app sees all of them (that is
// the visibility rule), so their list needs no visibility check.
func (s *Service) AppBuckets(ctx context.Context, c Caller, app string, limit int) (buckets.Page, error) {
	f := buckets.Filter{App: app, Limit: limit, VisibleTo: s.Visible(c)}
	if _, member := s.Roles(c)[app]; member {
		f.VisibleTo = nil
	}
	return s.buckets.List(ctx, f)
}

// ListBuckets returns one page of the buckets the caller may see.
func (s *Service) ListBuckets(ctx context.Context, c Caller, q BucketQuery) (buckets.Page, error) {
	return s.buckets.List(ctx, buckets.Filter{Search: q.Search, App: q.App, After: q.After, Before: q.Before, Limit: q.Limit,
		VisibleTo: s.Visible(c)})
}

// OwnedApps lists, sorted, the apps the caller may create buckets for:
// those they own, or every app for an admin.
func (s *Service) OwnedApps(ctx context.Context, c Caller) ([]string, error) {
	if s.IsAdmin(c) {
		return s.AppNames(ctx, c)
	}
	var out []string
	for app, role := range s.Roles(c) {
		if role == rbac.RoleOwner {
			out = append(out, app)
		}
	}
	slices.Sort(out)
	return out, nil
}

// BucketDraft returns the apps the caller may create a bucket for, or a
// refusal (audited) when there is none.
func (s *Service) BucketDraft(ctx context.Context, c Caller) ([]string, error) {
	owned, err := s.OwnedApps(ctx, c)
	if err != nil {
		return nil, err
	}
	if len(owned) == 0 {
		return nil, s.Refuse(ctx, c, Refusal{ObjectType: "bucket", Why: "creating a bucket needs the owner role on an app"},
			errs.Forbiddenf("creating a bucket needs the owner role on an app"))
	}
	return owned, nil
}

// BucketPatch carries the settable fields of a bucket as a request gives
// them; nil means "not given". The console's form parser and the API's
// JSON decoder both fill one, so a field added here reaches both.
type BucketPatch struct {
	Name     *string
	OwnerApp *string
	// Kind is taken only when the bucket is created, like Keyed.
	Kind        *string
	Description *string
	MaxPermits  *int64
	// Rate is the rate's text ("100/min", "0.5 per second"); empty for
	// the kinds that do not refill.
	Rate        *string
	AllowedApps *[]string
	// Keyed is taken only when the bucket is created; an update that
	// would change it is refused.
	Keyed       *bool
	Shadow      *bool
	LeaseMillis *int64
	// QuotaPeriod and TimeZone are a quota's calendar period and time
	// zone; they may change (the running period's count starts again
	// from 0 when its start moves).
	QuotaPeriod *string
	TimeZone    *string
	// SlotMillis is a concurrency limit's slot lease time.
	SlotMillis *int64
	// Reserve is the tokens kept for critical requests.
	Reserve *int64
	// Problems are fields the transport could not even parse (a capacity
	// that is not a number). They are reported together with what
	// validation finds, and nothing is saved.
	Problems errs.Validation
}

// Apply copies the given fields onto b, then validates b. Every problem is
// reported at once, one per field, those of the transport first.
func (p *BucketPatch) Apply(b *buckets.Bucket) error {
	set(&b.Name, p.Name)
	set(&b.OwnerApp, p.OwnerApp)
	if p.Kind != nil {
		b.Kind = buckets.Kind(*p.Kind)
	}
	set(&b.Description, p.Description)
	set(&b.MaxPermits, p.MaxPermits)
	set(&b.AllowedApps, p.AllowedApps)
	set(&b.Keyed, p.Keyed)
	set(&b.Shadow, p.Shadow)
	set(&b.LeaseMillis, p.LeaseMillis)
	if p.QuotaPeriod != nil {
		b.QuotaPeriod = quota.Period(*p.QuotaPeriod)
	}
	set(&b.TimeZone, p.TimeZone)
	set(&b.SlotMillis, p.SlotMillis)
	set(&b.Reserve, p.Reserve)
	return checkPatch(p.Problems, &b.Rate, p.Rate, b.Validate)
}

// checkPatch ends the Apply of a patch with a rate: it parses rate, when
// given, into dst, then reports every problem at once, one per field: the
// transport's (problems), the rate's, then those validate finds.
func checkPatch(problems errs.Validation, dst *buckets.Rate, rate *string, validate func() error) error {
	v := errs.Validation{Fields: slices.Clone(problems.Fields)}
	if rate != nil {
		// No rate is right for the kinds that do not refill; validate
		// reports it missing for a token bucket.
		r, err := buckets.ParseOptionalRate(*rate)
		if err != nil {
			v.Add("rate", errs.Fields(err).For("rate"))
		}
		*dst = r
	}
	if err := validate(); err != nil {
		for _, fe := range errs.Fields(err).Fields {
			if v.For(fe.Field) == "" {
				v.Fields = append(v.Fields, fe)
			}
		}
	}
	return v.Err()
}

func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// CreateBucket defines a new bucket.
type CreateBucket struct {
	Fields BucketPatch
}

// CreateBucket needs the owner role on the bucket's owner app. The bucket
// is validated first: every field problem is reported at once.
func (s *Service) CreateBucket(ctx context.Context, c Caller, req CreateBucket) (*buckets.Bucket, error) {
	b := &buckets.Bucket{}
	if err := req.Fields.Apply(b); err != nil {
		return nil, err
	}
	if !s.can(c, b.OwnerApp, rbac.ActionEdit) {
		// The same 403 whether or not the app exists: it says nothing the
		// caller could not already know.
		return nil, s.Refuse(ctx, c, Refusal{App: b.OwnerApp, ObjectType: "bucket", ObjectName: b.Name,
			Why: "creating a bucket needs the owner role on its owner app"},
			errs.Forbiddenf("creating a bucket of app %q needs its owner role", b.OwnerApp))
	}
	if err := s.buckets.Create(ctx, c.Actor(), b); err != nil {
		return nil, err
	}
	return b, nil
}

// BucketView is a bucket as its reader may see it.
type BucketView struct {
	*buckets.Bucket
	// CanEdit tells whether the caller may change or delete it.
	CanEdit bool
}

// Bucket returns the bucket named name if the caller may see it: a member
// of its owner app or of an allowed app, or an admin. An invisible bucket
// answers like a missing one, and is audited.
func (s *Service) Bucket(ctx context.Context, c Caller, name string) (*BucketView, error) {
	b, err := s.bucketFor(ctx, c, name, rbac.ActionView)
	if err != nil {
		return nil, err
	}
	return &BucketView{Bucket: b, CanEdit: s.can(c, b.OwnerApp, rbac.ActionEdit)}, nil
}

// EditableBucket returns the bucket named name if the caller may change
// it (an edit form, a delete confirmation).
func (s *Service) EditableBucket(ctx context.Context, c Caller, name string) (*buckets.Bucket, error) {
	return s.bucketFor(ctx, c, name, rbac.ActionEdit)
}

// bucketFor loads the bucket for act: a 404 when the caller may not see
// it, exactly as if it did not exist; a 403 when they see it but may not
// do act.
func (s *Service) bucketFor(ctx context.Context, c Caller, name string, act rbac.Action) (*buckets.Bucket, error) {
	b, err := s.buckets.Get(ctx, name)
	if errors.Is(err, errs.ErrNotFound) {
		return nil, errs.NotFoundf("bucket %q not found", name)
	}
	if err != nil {
		return nil, err
	}
	if s.IsAdmin(c) {
		return b, nil
	}
	if c.User == nil || !s.enf.CanSeeBucket(c.Name(), b.OwnerApp, b.AllowedApps) {
		return nil, s.Refuse(ctx, c, Refusal{App: b.OwnerApp, ObjectType: "bucket", ObjectName: b.Name, Why: "not visible to the user"},
			errs.NotFoundf("bucket %q not found", name))
	}
	if act != rbac.ActionView && !s.enf.Can(c.Name(), b.OwnerApp, rbac.ActionEdit) {
		return nil, s.Refuse(ctx, c, Refusal{App: b.OwnerApp, ObjectType: "bucket", ObjectName: b.Name,
			Why: "changing a bucket needs the owner role on its owner app"},
			errs.Forbiddenf("changing bucket %q needs the owner role on app %q", b.Name, b.OwnerApp))
	}
	return b, nil
}

// UpdateBucket changes a bucket.
type UpdateBucket struct {
	Name string
	// Version is the version the change is based on; 0 means whatever
	// version is current.
	Version int64
	// Replace resets the fields not given to their defaults (empty
	// description, allowed apps = the owner app, shadow and lease off;
	// capacity and, for a token bucket, rate, for a quota, its period, are
	// then required; a quota's time zone is UTC; kind and
	// keyed are kept). Otherwise they
	// keep their values.
	Replace bool
	Fields  BucketPatch
}

// BucketChange is the outcome of a change.
type BucketChange struct {
	Bucket *buckets.Bucket
	// Changed is false when the request changed nothing: no version was
	// used, no event sent, nothing audited.
	Changed bool
}

// UpdateBucket needs the owner role on the bucket's owner app. The fields
// fixed at creation (buckets.Bucket.CheckFixed) cannot change. A change
// based on an older version is an *errs.Stale.
func (s *Service) UpdateBucket(ctx context.Context, c Caller, req UpdateBucket) (BucketChange, error) {
	cur, err := s.bucketFor(ctx, c, req.Name, rbac.ActionEdit)
	if err != nil {
		return BucketChange{}, err
	}
	if err := cur.CheckVersion(req.Version); err != nil {
		return BucketChange{}, err
	}
	b := *cur
	if req.Replace {
		b = buckets.Bucket{ID: cur.ID, Name: cur.Name, OwnerApp: cur.OwnerApp, Kind: cur.Kind, Keyed: cur.Keyed}
	}
	b.Version = cur.Version
	err = req.Fields.Apply(&b)
	// A change of a fixed field first: what else is wrong may follow from
	// it (a quota has no rate).
	if ferr := b.CheckFixed(cur); ferr != nil {
		return BucketChange{}, ferr
	}
	if err != nil {
		return BucketChange{}, err
	}
	if b.SameSettings(cur) {
		return BucketChange{Bucket: cur}, nil
	}
	if err := s.buckets.Update(ctx, c.Actor(), &b); err != nil {
		return BucketChange{}, err
	}
	return BucketChange{Bucket: &b, Changed: true}, nil
}

// DeleteBucket deletes a bucket.
type DeleteBucket struct {
	Name string
	// Version is the version the caller saw; 0 means whatever is current.
	Version int64
}

// DeleteBucket needs the owner role on the bucket's owner app. A bucket
// changed since the caller saw it is not deleted (an *errs.Stale).
func (s *Service) DeleteBucket(ctx context.Context, c Caller, req DeleteBucket) error {
	b, err := s.bucketFor(ctx, c, req.Name, rbac.ActionEdit)
	if err != nil {
		return err
	}
	if err := b.CheckVersion(req.Version); err != nil {
		return err
	}
	err = s.buckets.Delete(ctx, c.Actor(), b.Name, buckets.Expect{ID: b.ID, OwnerApp: b.OwnerApp, Version: b.Version})
	if errors.Is(err, errs.ErrNotFound) {
		return errs.NotFoundf("bucket %q not found", b.Name)
	}
	return err
}
