package api

import (
	"net/http"
	"strconv"

	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/manage"
)

// overrideJSON is an override of a keyed bucket as the API returns it.
type overrideJSON struct {
	ID          int64  `json:"id"`
	Bucket      string `json:"bucket"`
	Match       string `json:"match"`
	Key         string `json:"key"`
	Description string `json:"description"`
	MaxPermits  int64  `json:"max_permits"`
	rateJSON
	Shadow bool `json:"shadow"`
	stampJSON
}

func toOverrideJSON(o *buckets.Override) overrideJSON {
	return overrideJSON{ID: o.ID, Bucket: o.Bucket, Match: string(o.Match), Key: o.Key, Description: o.Description,
		MaxPermits: o.MaxPermits, rateJSON: toRateJSON(o.Rate), Shadow: o.Shadow, stampJSON: toStampJSON(o.Stamp)}
}

// overrideInput is the body of POST, PUT and PATCH on overrides; like
// bucketInput, read-only fields are refused as unknown.
type overrideInput struct {
	Match       *string `json:"match"`
	Key         *string `json:"key"`
	Description *string `json:"description"`
	MaxPermits  *int64  `json:"max_permits"`
	Rate        *string `json:"rate"`
	Shadow      *bool   `json:"shadow"`
}

func (in *overrideInput) patch() manage.OverridePatch {
	return manage.OverridePatch{Match: in.Match, Key: in.Key, Description: in.Description, MaxPermits: in.MaxPermits,
		Rate: in.Rate, Shadow: in.Shadow}
}

// overrideID reads the {id} of the path. An id that is not a number names
// no override: 404, as for any missing one.
func overrideID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		return 0, errs.NotFoundf("override %q not found", r.PathValue("id"))
	}
	return id, nil
}

// listOverrides: GET /buckets/{bucket}/overrides?search=&match=&cursor=&limit=,
// ordered by key.
func (s *server) listOverrides(w http.ResponseWriter, r *http.Request, c manage.Caller) error {
	search, err := query(r, "search", buckets.MaxKeyLength)
	if err != nil {
		return err
	}
	match, err := query(r, "match", 6)
	if err != nil {
		return err
	}
	if match != "" && match != string(buckets.MatchExact) && match != string(buckets.MatchPrefix) {
		return badParam("match", `must be "exact" or "prefix"`)
	}
	cursor, limit, err := page(r, "override")
	if err != nil {
		return err
	}
	p, err := s.svc.ListOverrides(r.Context(), c, r.PathValue("bucket"),
		manage.OverrideQuery{Search: search, Match: match, After: cursor, Limit: limit})
	if err != nil {
		return err
	}
	writePage(w, "overrides", nextCursor("override", p.Next), p.Total, p.Overrides, toOverrideJSON)
	return nil
}

// createOverride: POST /buckets/{bucket}/overrides, owner role on the
// bucket's owner app.
func (s *server) createOverride(w http.ResponseWriter, r *http.Request, c manage.Caller) error {
	var in overrideInput
	if err := decode(r, &in); err != nil {
		return refusedFirst(err, s.bucketEditor(r, c))
	}
	o, err := s.svc.CreateOverride(r.Context(), c, manage.CreateOverride{Bucket: r.PathValue("bucket"), Fields: in.patch()})
	if err != nil {
		return err
	}
	writeVersioned(w, http.StatusCreated, Prefix+"/buckets/"+o.Bucket+"/overrides/"+strconv.FormatInt(o.ID, 10),
		o.Version, toOverrideJSON(o))
	return nil
}

// getOverride: GET /buckets/{bucket}/overrides/{id}, with the version as ETag.
func (s *server) getOverride(w http.ResponseWriter, r *http.Request, c manage.Caller) error {
	id, err := overrideID(r)
	if err != nil {
		return err
	}
	o, err := s.svc.Override(r.Context(), c, r.PathValue("bucket"), id)
	if err != nil {
		return err
	}
	writeVersioned(w, http.StatusOK, "", o.Version, toOverrideJSON(o.Override))
	return nil
}

// updateOverride: PUT and PATCH /buckets/{bucket}/overrides/{id}, with
// If-Match. PUT gives absent fields their defaults; match and key may be
// sent but cannot change. PATCH changes the fields given.
func (s *server) updateOverride(w http.ResponseWriter, r *http.Request, c manage.Caller) error {
	var in overrideInput
	version, err := precondition(r, &in, s.bucketEditor(r, c))
	if err != nil {
		return err
	}
	id, err := overrideID(r)
	if err != nil {
		return err
	}
	ch, err := s.svc.UpdateOverride(r.Context(), c, manage.UpdateOverride{Bucket: r.PathValue("bucket"), ID: id,
		Version: version, Replace: r.Method == http.MethodPut, Fields: in.patch()})
	if err != nil {
		return err
	}
	writeVersioned(w, http.StatusOK, "", ch.Override.Version, toOverrideJSON(ch.Override))
	return nil
}

// deleteOverride: DELETE /buckets/{bucket}/overrides/{id}, with If-Match.
func (s *server) deleteOverride(w http.ResponseWriter, r *http.Request, c manage.Caller) error {
	version, err := precondition(r, nil, s.bucketEditor(r, c))
	if err != nil {
		return err
	}
	id, err := overrideID(r)
	if err != nil {
		return err
	}
	if err := s.svc.DeleteOverride(r.Context(), c, manage.DeleteOverride{Bucket: r.PathValue("bucket"), ID: id, Version: version}); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
