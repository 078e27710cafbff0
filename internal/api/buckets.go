package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/sluicehq/sluice/internal/apps"
	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/rbac"
)

// bucketJSON is a bucket as the API returns it. The rate is given twice:
// as its canonical text ("0.5/s"), which is also what clients send, and as
// the exact permits (a decimal number with at most 6 decimals) per whole
// number of seconds, for programs that compute with it.
type bucketJSON struct {
	Name              string      `json:"name"`
	OwnerApp          string      `json:"owner_app"`
	Description       string      `json:"description"`
	MaxPermits        int64       `json:"max_permits"`
	Rate              string      `json:"rate"`
	RatePermits       json.Number `json:"rate_permits"`
	RatePeriodSeconds int64       `json:"rate_period_seconds"`
	AllowedApps       []string    `json:"allowed_apps"`
	Version           int64       `json:"version"`
	CreatedBy         string      `json:"created_by"`
	CreatedAt         time.Time   `json:"created_at"`
	UpdatedBy         string      `json:"updated_by"`
	UpdatedAt         time.Time   `json:"updated_at"`
}

func toBucketJSON(b *buckets.Bucket) bucketJSON {
	allowed := b.AllowedApps
	if allowed == nil {
		allowed = []string{}
	}
	return bucketJSON{
		Name: b.Name, OwnerApp: b.OwnerApp, Description: b.Description, MaxPermits: b.MaxPermits,
		Rate: b.Rate.String(), RatePermits: json.Number(b.Rate.Permits()), RatePeriodSeconds: b.Rate.PeriodSeconds(),
		AllowedApps: allowed, Version: b.Version,
		CreatedBy: b.CreatedBy, CreatedAt: b.CreatedAt, UpdatedBy: b.UpdatedBy, UpdatedAt: b.UpdatedAt,
	}
}

// bucketInput is the body of POST, PUT and PATCH on buckets. Only the
// fields a user sets are accepted; read-only ones (version, created_by,
// rate_permits, ...) are unknown fields and refused, so a client cannot
// believe it changed them. A field that is absent or null is "not given".
type bucketInput struct {
	Name        *string   `json:"name"`
	OwnerApp    *string   `json:"owner_app"`
	Description *string   `json:"description"`
	MaxPermits  *int64    `json:"max_permits"`
	Rate        *string   `json:"rate"`
	AllowedApps *[]string `json:"allowed_apps"`
}

// apply copies the given fields of in onto b and parses the rate. A bad
// rate is returned as its field error, to be reported with the others.
func (in *bucketInput) apply(b *buckets.Bucket) (rateErr error) {
	if in.Name != nil {
		b.Name = *in.Name
	}
	if in.OwnerApp != nil {
		b.OwnerApp = *in.OwnerApp
	}
	if in.Description != nil {
		b.Description = *in.Description
	}
	if in.MaxPermits != nil {
		b.MaxPermits = *in.MaxPermits
	}
	if in.AllowedApps != nil {
		b.AllowedApps = *in.AllowedApps
	}
	if in.Rate != nil {
		rate, err := buckets.ParseRate(*in.Rate)
		if err != nil {
			b.Rate = buckets.Rate{}
			return err
		}
		b.Rate = rate
	}
	return nil
}

// validate checks b as the store will, so that every field error,
// including a rate that did not parse, is reported at once.
func validate(b *buckets.Bucket, rateErr error) error {
	err := b.Validate()
	if rateErr == nil {
		return err
	}
	var v errs.Validation
	if f := errs.Fields(err); f != nil {
		for _, fe := range f.Fields {
			if fe.Field != "rate" {
				v.Fields = append(v.Fields, fe)
			}
		}
	}
	v.Add("rate", errs.Fields(rateErr).For("rate"))
	return v.Err()
}

// listBuckets: GET /buckets?search=&app=&cursor=&limit=, the buckets the
// caller can see (all for admins), ordered by name.
func (s *server) listBuckets(w http.ResponseWriter, r *http.Request, c *caller) error {
	search, err := query(r, "search", 63)
	if err != nil {
		return err
	}
	app, err := query(r, "app", 63)
	if err != nil {
		return err
	}
	if app != "" && !apps.ValidName(app) {
		return badParam("app", "must be an app name")
	}
	cursor, limit, err := page(r, "bucket")
	if err != nil {
		return err
	}
	p, err := s.Buckets.List(r.Context(), buckets.Filter{
		Search: search, App: app, VisibleTo: s.visibleApps(c), After: cursor, Limit: limit,
	})
	if err != nil {
		return err
	}
	out := struct {
		Buckets    []bucketJSON `json:"buckets"`
		NextCursor string       `json:"next_cursor,omitempty"`
		Total      int          `json:"total"`
	}{Buckets: make([]bucketJSON, 0, len(p.Buckets)), NextCursor: nextCursor("bucket", p.Next), Total: p.Total}
	for _, b := range p.Buckets {
		out.Buckets = append(out.Buckets, toBucketJSON(b))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// canEdit checks the owner role on the bucket's owner app.
func (s *server) canEdit(c *caller, ownerApp string) bool {
	return s.isAdmin(c) || s.Enforcer.Can(c.name(), ownerApp, rbac.ActionEdit)
}

// createBucket: POST /buckets. It needs the owner role on owner_app.
func (s *server) createBucket(w http.ResponseWriter, r *http.Request, c *caller) error {
	var in bucketInput
	if err := decode(r, &in); err != nil {
		return err
	}
	b := &buckets.Bucket{}
	if err := validate(b, in.apply(b)); err != nil {
		return err
	}
	if !s.canEdit(c, b.OwnerApp) {
		// The same 403 whether or not the app exists: it says nothing the
		// caller could not already know.
		return s.denied(r.Context(), c, r, b.OwnerApp, "bucket", b.Name,
			forbidden("creating a bucket of app %q needs its owner role", b.OwnerApp))
	}
	if err := s.Buckets.Create(r.Context(), c.actor, b); err != nil {
		return err
	}
	w.Header().Set("Location", Prefix+"/buckets/"+b.Name)
	w.Header().Set("ETag", etag(b.Version))
	writeJSON(w, http.StatusCreated, toBucketJSON(b))
	return nil
}

// visibleBucket loads the bucket named in the path if the caller may see
// it: a member of its owner app or of an allowed app, or an admin. An
// invisible bucket is a 404 like a missing one, audited as denied.
func (s *server) visibleBucket(r *http.Request, c *caller) (*buckets.Bucket, error) {
	name := r.PathValue("bucket")
	b, err := s.Buckets.Get(r.Context(), name)
	if errors.Is(err, errs.ErrNotFound) {
		return nil, notFound("bucket", name)
	}
	if err != nil {
		return nil, err
	}
	if !s.isAdmin(c) && !s.Enforcer.CanSeeBucket(c.name(), b.OwnerApp, b.AllowedApps) {
		return nil, s.denied(r.Context(), c, r, b.OwnerApp, "bucket", b.Name, notFound("bucket", name))
	}
	return b, nil
}

// editableBucket is visibleBucket plus the owner role on its owner app and
// the If-Match precondition. It returns the bucket and the version the
// change is based on (the current one for "If-Match: *").
func (s *server) editableBucket(r *http.Request, c *caller) (*buckets.Bucket, int64, error) {
	b, err := s.visibleBucket(r, c)
	if err != nil {
		return nil, 0, err
	}
	if !s.canEdit(c, b.OwnerApp) {
		return nil, 0, s.denied(r.Context(), c, r, b.OwnerApp, "bucket", b.Name,
			forbidden("changing bucket %q needs the owner role on app %q", b.Name, b.OwnerApp))
	}
	version, err := ifMatch(r)
	if err != nil {
		return nil, 0, err
	}
	if version == 0 {
		version = b.Version
	}
	if version != b.Version {
		return nil, 0, preconditionFailed("bucket " + b.Name + " is now at version " + etag(b.Version) +
			", not " + etag(version) + "; GET it again and reapply your change")
	}
	return b, version, nil
}

// getBucket: GET /buckets/{bucket}, with the version as ETag.
func (s *server) getBucket(w http.ResponseWriter, r *http.Request, c *caller) error {
	b, err := s.visibleBucket(r, c)
	if err != nil {
		return err
	}
	w.Header().Set("ETag", etag(b.Version))
	writeJSON(w, http.StatusOK, toBucketJSON(b))
	return nil
}

// replaceBucket: PUT /buckets/{bucket} replaces every settable field:
// absent ones take their defaults (empty description, allowed apps = the
// owner app) or fail validation (max_permits, rate). name and owner_app
// may be sent but cannot change.
func (s *server) replaceBucket(w http.ResponseWriter, r *http.Request, c *caller) error {
	return s.update(w, r, c, true)
}

// patchBucket: PATCH /buckets/{bucket} changes only the fields given.
func (s *server) patchBucket(w http.ResponseWriter, r *http.Request, c *caller) error {
	return s.update(w, r, c, false)
}

func (s *server) update(w http.ResponseWriter, r *http.Request, c *caller, replace bool) error {
	cur, version, err := s.editableBucket(r, c)
	if err != nil {
		return err
	}
	var in bucketInput
	if err := decode(r, &in); err != nil {
		return err
	}
	if in.Name != nil && *in.Name != cur.Name {
		return errs.Invalid("name", "cannot be changed; create a new bucket and delete this one instead")
	}
	b := *cur
	if replace {
		b = buckets.Bucket{ID: cur.ID, Name: cur.Name, OwnerApp: cur.OwnerApp}
	}
	b.Version = version
	if err := validate(&b, in.apply(&b)); err != nil {
		return err
	}
	if unchanged(cur, &b) {
		// Saving would bump the version and send a sync event for nothing.
		w.Header().Set("ETag", etag(cur.Version))
		writeJSON(w, http.StatusOK, toBucketJSON(cur))
		return nil
	}
	if err := s.Buckets.Update(r.Context(), c.actor, &b); err != nil {
		return stale(err)
	}
	w.Header().Set("ETag", etag(b.Version))
	writeJSON(w, http.StatusOK, toBucketJSON(&b))
	return nil
}

// unchanged reports whether b, validated, has the settings of cur.
func unchanged(cur, b *buckets.Bucket) bool {
	return cur.OwnerApp == b.OwnerApp && cur.Description == b.Description && cur.MaxPermits == b.MaxPermits &&
		cur.Rate == b.Rate && slices.Equal(cur.AllowedApps, b.AllowedApps)
}

// deleteBucket: DELETE /buckets/{bucket}, with If-Match.
func (s *server) deleteBucket(w http.ResponseWriter, r *http.Request, c *caller) error {
	b, version, err := s.editableBucket(r, c)
	if err != nil {
		return err
	}
	if err := s.Buckets.Delete(r.Context(), c.actor, b.Name, buckets.Expect{ID: b.ID, OwnerApp: b.OwnerApp, Version: version}); err != nil {
		if errors.Is(err, errs.ErrNotFound) {
			return notFound("bucket", b.Name)
		}
		return stale(err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
