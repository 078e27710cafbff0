package api

import (
	"encoding/json"
	"net/http"

	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/manage"
	"github.com/sluicehq/sluice/internal/redisscript/names"
)

// bucketJSON is a bucket as the API returns it.
type bucketJSON struct {
	Name        string `json:"name"`
	OwnerApp    string `json:"owner_app"`
	Kind        string `json:"kind"`
	Description string `json:"description"`
	MaxPermits  int64  `json:"max_permits"`
	rateJSON
	AllowedApps []string `json:"allowed_apps"`
	Keyed       bool     `json:"keyed"`
	Shadow      bool     `json:"shadow"`
	LeaseMillis int64    `json:"lease_ms"`
	SlotMillis  int64    `json:"slot_ms"`
	// QuotaPeriod and TimeZone are a quota's calendar period and zone;
	// empty for the other kinds. Not "period": rate_period_seconds is
	// the refill's.
	QuotaPeriod string `json:"quota_period"`
	TimeZone    string `json:"time_zone"`
	Reserve     int64  `json:"reserve"`
	stampJSON
}

// rateJSON is the rate of a bucket or an override, given twice: as its
// canonical text ("0.5/s"), which is also what clients send, and as the
// exact permits (a decimal number with at most 6 decimals) per whole
// number of seconds, for programs that compute with it.
type rateJSON struct {
	Rate              string      `json:"rate"`
	RatePermits       json.Number `json:"rate_permits"`
	RatePeriodSeconds int64       `json:"rate_period_seconds"`
}

func toRateJSON(r buckets.Rate) rateJSON {
	return rateJSON{Rate: r.String(), RatePermits: json.Number(r.Permits()), RatePeriodSeconds: r.PeriodSeconds()}
}

func toBucketJSON(b *buckets.Bucket) bucketJSON {
	allowed := b.AllowedApps
	if allowed == nil {
		allowed = []string{}
	}
	return bucketJSON{
		Name: b.Name, OwnerApp: b.OwnerApp, Kind: string(b.Kind.Or()), Description: b.Description, MaxPermits: b.MaxPermits, rateJSON: toRateJSON(b.Rate),
		AllowedApps: allowed, Keyed: b.Keyed, Shadow: b.Shadow, LeaseMillis: b.LeaseMillis, SlotMillis: b.SlotMillis,
		QuotaPeriod: string(b.QuotaPeriod), TimeZone: b.TimeZone, Reserve: b.Reserve, stampJSON: toStampJSON(b.Stamp),
	}
}

// bucketInput is the body of POST, PUT and PATCH on buckets. Only the
// fields a user sets are accepted; read-only ones (version, created_by,
// rate_permits, ...) are unknown fields and refused, so a client cannot
// believe it changed them. A field that is absent or null is "not given".
type bucketInput struct {
	Name     *string `json:"name"`
	OwnerApp *string `json:"owner_app"`
	// Kind is taken on creation only, like keyed.
	Kind        *string   `json:"kind"`
	Description *string   `json:"description"`
	MaxPermits  *int64    `json:"max_permits"`
	Rate        *string   `json:"rate"`
	AllowedApps *[]string `json:"allowed_apps"`
	// Keyed is taken on creation only; a change of it is refused.
	Keyed       *bool  `json:"keyed"`
	Shadow      *bool  `json:"shadow"`
	LeaseMillis *int64 `json:"lease_ms"`
	// SlotMillis is a concurrency limit's slot lease time.
	SlotMillis  *int64  `json:"slot_ms"`
	QuotaPeriod *string `json:"quota_period"`
	TimeZone    *string `json:"time_zone"`
	Reserve     *int64  `json:"reserve"`
}

// patch is the input as the application layer reads it.
func (in *bucketInput) patch() manage.BucketPatch {
	return manage.BucketPatch{Name: in.Name, OwnerApp: in.OwnerApp, Kind: in.Kind, Description: in.Description,
		MaxPermits: in.MaxPermits, Rate: in.Rate, AllowedApps: in.AllowedApps,
		Keyed: in.Keyed, Shadow: in.Shadow, LeaseMillis: in.LeaseMillis, SlotMillis: in.SlotMillis, QuotaPeriod: in.QuotaPeriod,
		TimeZone: in.TimeZone, Reserve: in.Reserve}
}

// listBuckets: GET /buckets?search=&app=&cursor=&limit=, the buckets the
// caller can see (all for admins), ordered by name.
func (s *server) listBuckets(w http.ResponseWriter, r *http.Request, c manage.Caller) error {
	search, err := query(r, "search", 63)
	if err != nil {
		return err
	}
	app, err := query(r, "app", 63)
	if err != nil {
		return err
	}
	if app != "" && !names.Valid(app) {
		return badParam("app", "must be an app name")
	}
	cursor, limit, err := page(r, "bucket")
	if err != nil {
		return err
	}
	p, err := s.svc.ListBuckets(r.Context(), c, manage.BucketQuery{Search: search, App: app, After: cursor, Limit: limit})
	if err != nil {
		return err
	}
	writePage(w, "buckets", nextCursor("bucket", p.Next), p.Total, p.Buckets, toBucketJSON)
	return nil
}

// createBucket: POST /buckets. It needs the owner role on owner_app.
func (s *server) createBucket(w http.ResponseWriter, r *http.Request, c manage.Caller) error {
	var in bucketInput
	if err := decode(r, &in); err != nil {
		return err
	}
	b, err := s.svc.CreateBucket(r.Context(), c, manage.CreateBucket{Fields: in.patch()})
	if err != nil {
		return err
	}
	writeVersioned(w, http.StatusCreated, Prefix+"/buckets/"+b.Name, b.Version, toBucketJSON(b))
	return nil
}

// getBucket: GET /buckets/{bucket}, with the version as ETag.
func (s *server) getBucket(w http.ResponseWriter, r *http.Request, c manage.Caller) error {
	b, err := s.svc.Bucket(r.Context(), c, r.PathValue("bucket"))
	if err != nil {
		return err
	}
	writeVersioned(w, http.StatusOK, "", b.Version, toBucketJSON(b.Bucket))
	return nil
}

// bucketEditor is the access check of a change to the bucket in the path
// or to one of its overrides.
func (s *server) bucketEditor(r *http.Request, c manage.Caller) func() error {
	return func() error {
		_, err := s.svc.EditableBucket(r.Context(), c, r.PathValue("bucket"))
		return err
	}
}

// updateBucket: PUT and PATCH /buckets/{bucket}, with If-Match. PUT
// replaces every settable field: absent ones take their defaults (empty
// description, allowed apps = the owner app) or fail validation
// (max_permits, rate); name and owner_app may be sent but cannot change.
// PATCH changes only the fields given.
func (s *server) updateBucket(w http.ResponseWriter, r *http.Request, c manage.Caller) error {
	var in bucketInput
	version, err := precondition(r, &in, s.bucketEditor(r, c))
	if err != nil {
		return err
	}
	ch, err := s.svc.UpdateBucket(r.Context(), c, manage.UpdateBucket{Name: r.PathValue("bucket"), Version: version,
		Replace: r.Method == http.MethodPut, Fields: in.patch()})
	if err != nil {
		return err
	}
	writeVersioned(w, http.StatusOK, "", ch.Bucket.Version, toBucketJSON(ch.Bucket))
	return nil
}

// deleteBucket: DELETE /buckets/{bucket}, with If-Match.
func (s *server) deleteBucket(w http.ResponseWriter, r *http.Request, c manage.Caller) error {
	version, err := precondition(r, nil, s.bucketEditor(r, c))
	if err != nil {
		return err
	}
	if err := s.svc.DeleteBucket(r.Context(), c, manage.DeleteBucket{Name: r.PathValue("bucket"), Version: version}); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
