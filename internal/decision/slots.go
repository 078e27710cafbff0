package decision

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/errs"
)

// Concurrency limits over HTTP. Envoy's rate limit API has no release, so
// slots are HTTP only: POST /v1/slots takes one and answers its id; POST
// /v1/slots/release and /v1/slots/renew name it. The service keeps no
// state: any copy of it releases a slot any copy took (the slot is in
// Redis), except one taken by the local failure policy during an outage,
// which only the copy that took it can release; elsewhere it expires
// after its lease time.

// Slotter takes, releases and renews slots as one app: *client.Limiter.
type Slotter interface {
	TakeSlot(ctx context.Context, limit string) (*client.Slot, error)
	TakeSlotKey(ctx context.Context, limit, key string) (*client.Slot, error)
	ReleaseSlot(ctx context.Context, limit, key, id string) (client.SlotResult, error)
	RenewSlot(ctx context.Context, limit, key, id string) (client.SlotResult, error)
}

var _ Slotter = (*client.Limiter)(nil)

// SlotRequest is the JSON body of POST /v1/slots (Slot empty), and of
// /v1/slots/release and /v1/slots/renew (Slot the id the take answered).
type SlotRequest struct {
	Limit string `json:"limit"`
	// Key is the key of a keyed concurrency limit; empty for a shared one.
	Key  string `json:"key,omitempty"`
	Slot string `json:"slot,omitempty"`
}

// SlotResponse is the JSON answer of the slot endpoints. Durations are
// seconds, with microsecond precision.
type SlotResponse struct {
	// Allowed: the take got a slot, the release freed it, the renewal
	// moved its expiry. A release or renewal of a slot that was not held
	// (released before, expired) is not allowed and changes nothing.
	Allowed bool `json:"allowed"`
	// Slot is the id of the slot taken (a take that was allowed).
	Slot string `json:"slot,omitempty"`
	// InUse is the slots held after the call, Limit the most at once.
	InUse int64 `json:"in_use"`
	Limit int64 `json:"limit"`
	// RetryAfter is, when a take is denied, the time until the first held
	// slot expires at the latest.
	RetryAfter float64 `json:"retry_after"`
	// Lease is the slot lease time: a slot expires that long after it was
	// taken or renewed, unless renewed again.
	Lease     float64 `json:"lease"`
	WouldDeny bool    `json:"would_deny,omitempty"`
	Fallback  bool    `json:"fallback,omitempty"`
}

// slotEndpoint answers one of the slot calls: a take answers 200 with the
// slot, or 429 at the limit (and when the failure policy refuses); a
// release or renewal answers 200 whether the slot was held or not
// (allowed says which), 503 when Redis did not answer (a slot not
// released expires after its lease time).
func (s *Service) slotEndpoint(op string) func(w http.ResponseWriter, r *http.Request, app string) string {
	return func(w http.ResponseWriter, r *http.Request, app string) string {
		req, err := decodeSlotRequest(w, r, op)
		if err != nil {
			return s.writeError(w, err)
		}
		res, id, err := s.Slot(r.Context(), app, op, req)
		if err != nil {
			return s.writeError(w, err)
		}
		if op == "take" {
			client.SetSlotHeaders(w.Header(), res)
		}
		w.Header().Set("Content-Type", "application/json")
		if op == "take" && !res.Allowed {
			w.WriteHeader(http.StatusTooManyRequests)
		}
		_ = json.NewEncoder(w).Encode(SlotResponse{Allowed: res.Allowed, Slot: id, InUse: res.InUse, Limit: res.Limit,
			RetryAfter: seconds(res.RetryAfter), Lease: seconds(res.Lease), WouldDeny: res.WouldDeny, Fallback: res.Fallback})
		if op == "take" && !res.Allowed {
			return "over_limit"
		}
		return "ok"
	}
}

func decodeSlotRequest(w http.ResponseWriter, r *http.Request, op string) (SlotRequest, error) {
	var req SlotRequest
	example := `{"limit": "exports"}`
	if op != "take" {
		example = `{"limit": "exports", "slot": "<the id the take answered>"}`
	}
	if err := decodeBody(w, r, &req, example); err != nil {
		return req, err
	}
	var v errs.Validation
	if req.Limit == "" {
		v.Add("limit", "is required")
	}
	switch {
	case op == "take" && req.Slot != "":
		v.Add("slot", "is chosen by the service: leave it out of a take")
	case op != "take" && req.Slot == "":
		v.Add("slot", "is required: the id the take answered")
	}
	if err := v.Err(); err != nil {
		return req, err
	}
	return req, CheckKey(req.Key)
}

// Slot runs one slot call of app: op "take", "release" or "renew". It
// returns the answer and, for a take that got a slot, its id. A take the
// failure policy refused (fail closed) is a denial, not an error: that is
// what the service chose for an outage.
func (s *Service) Slot(ctx context.Context, app, op string, req SlotRequest) (client.SlotResult, string, error) {
	acq, err := s.cfg.Acquirers.For(app)
	if err != nil {
		return client.SlotResult{}, "", err
	}
	sl, ok := acq.(Slotter)
	if !ok {
		return client.SlotResult{}, "", fmt.Errorf("app %q: concurrency limits are not served here: %w", app, errs.ErrUnavailable)
	}
	var res client.SlotResult
	var id string
	switch op {
	case "take":
		var slot *client.Slot
		if req.Key != "" {
			slot, err = sl.TakeSlotKey(ctx, req.Limit, req.Key)
		} else {
			slot, err = sl.TakeSlot(ctx, req.Limit)
		}
		res = slot.SlotResult
		if err == nil && res.Allowed {
			id = slot.ID()
		}
		if errors.Is(err, client.ErrUnavailable) {
			res.Allowed, err = false, nil
		}
	case "release":
		res, err = sl.ReleaseSlot(ctx, req.Limit, req.Key, req.Slot)
	case "renew":
		res, err = sl.RenewSlot(ctx, req.Limit, req.Key, req.Slot)
	}
	switch {
	case err == nil:
		return res, id, nil
	case errors.Is(err, client.ErrUnavailable):
		return res, "", fmt.Errorf("redis did not answer; a slot not released expires after its lease time: %w",
			errs.ErrUnavailable)
	case errors.Is(err, client.ErrUnknownBucket):
		return res, "", fmt.Errorf("no limit %q: %w", req.Limit, errs.ErrNotFound)
	case errors.Is(err, client.ErrAppNotAllowed):
		return res, "", fmt.Errorf("app %q may not take slots of limit %q: %w", app, req.Limit, errs.ErrForbidden)
	case errors.Is(err, client.ErrWrongKind):
		return res, "", errs.Invalid("limit", fmt.Sprintf("%q is not a concurrency limit: take its tokens with /v1/acquire", req.Limit))
	case errors.Is(err, client.ErrInvalidKey):
		return res, "", errs.Invalid("key", "must be 1 to 256 bytes")
	case errors.Is(err, client.ErrInvalidSlotID):
		return res, "", errs.Invalid("slot", "must be the id a take answered")
	}
	return res, "", err
}
