package decision

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/errs"
)

// DeniedStatus is the status of a denial on the GET form of /v1/acquire.
// nginx's auth_request passes only 2xx, 401 and 403 on, so a denial must
// be a 403; the nginx configuration in docs/gateways.md turns it into a
// 429 with Retry-After.
const DeniedStatus = http.StatusForbidden

// DecisionHeader marks the answers of the GET form: "allow" or "deny", so
// that a proxy can tell a denial from any other 403.
const DecisionHeader = "Sluice-Decision"

// WouldDenyHeader is set to "true" on an answer of the GET form that a
// bucket in shadow mode allowed but would have denied, so that a proxy
// can log it (the body of the POST form says it as "would_deny").
const WouldDenyHeader = "Sluice-Would-Deny"

// maxBody bounds the JSON body of POST /v1/acquire.
const maxBody = 4 << 10

// AcquireRequest is the JSON body of POST /v1/acquire.
type AcquireRequest struct {
	Bucket string `json:"bucket"`
	// Key is the key of a keyed bucket; empty for a plain bucket.
	Key string `json:"key,omitempty"`
	// N is the tokens to take; 0 or absent means 1.
	N int64 `json:"n,omitempty"`
	// Critical marks a request that may take the bucket's reserve.
	Critical bool `json:"critical,omitempty"`
}

// AcquireResponse is the JSON answer of POST /v1/acquire, with status 200
// when allowed and 429 when denied. Durations are seconds, with
// microsecond precision.
type AcquireResponse struct {
	Allowed    bool    `json:"allowed"`
	Remaining  int64   `json:"remaining"`
	Limit      int64   `json:"limit"`
	RetryAfter float64 `json:"retry_after"`
	ResetAfter float64 `json:"reset_after"`
	// WouldDeny is true when the bucket is in shadow mode and would have
	// denied: the call is allowed (200) and took nothing, and RetryAfter
	// says when the tokens would have been there. Always present, so that
	// a client trying shadow mode out can count it without a default.
	WouldDeny bool `json:"would_deny"`
	// Fallback is true when the failure policy answered, not Redis.
	Fallback bool `json:"fallback,omitempty"`
}

var jsonContentType = []string{"application/json"}

// errorBody is the JSON of every error answer.
type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// HTTPHandler serves POST and GET /v1/acquire, and the slots of
// concurrency limits (POST /v1/slots, /v1/slots/release, /v1/slots/renew).
func HTTPHandler(s *Service) http.Handler {
	mux := http.NewServeMux()
	s.Routes(mux, nil)
	return mux
}

// Routes registers HTTPHandler's routes on mux, each handler wrapped by
// wrap unless it is nil: one mux for the server's every route, where one
// nested in another would match every request twice.
func (s *Service) Routes(mux *http.ServeMux, wrap func(http.Handler) http.Handler) {
	handle := func(pattern string, h http.HandlerFunc) {
		if wrap != nil {
			mux.Handle(pattern, wrap(h))
			return
		}
		mux.Handle(pattern, h)
	}
	handle("POST /v1/acquire", s.endpoint(s.post))
	// The form for nginx auth_request: 200 to allow, DeniedStatus with
	// Retry-After to deny, 401 for a bad credential, and the usual error
	// statuses otherwise (which nginx answers as 500).
	handle("GET /v1/acquire", s.endpoint(s.get))
	handle("POST /v1/slots", s.endpoint(s.slotEndpoint("take")))
	handle("POST /v1/slots/release", s.endpoint(s.slotEndpoint("release")))
	handle("POST /v1/slots/renew", s.endpoint(s.slotEndpoint("renew")))
}

// endpoint authenticates a request's app token, has answer answer it as
// the token's app, and counts it by the result answer returns.
func (s *Service) endpoint(answer func(w http.ResponseWriter, r *http.Request, app string) (result string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		var result string
		if app, err := s.Authenticate(r.Header.Get("Authorization")); err != nil {
			result = s.writeError(w, err)
		} else {
			result = answer(w, r, app)
		}
		s.cfg.Metrics.request("http", result, start)
	}
}

// decodeBody reads r's body, at most maxBody bytes, into dst: one JSON
// object of valid UTF-8 without unknown fields, like example. Anything else
// is a *errs.Validation on body.
func decodeBody(w http.ResponseWriter, r *http.Request, dst any, example string) error {
	raw, err := readBody(w, r)
	if err != nil {
		return err
	}
	return decodeJSON(raw, dst, example)
}

// readBody reads r's body, at most maxBody bytes of valid UTF-8.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body := http.MaxBytesReader(w, r.Body, maxBody)
	var raw []byte
	var err error
	if n := r.ContentLength; n >= 0 && n <= maxBody {
		// The declared length at once (the server's reader stops there);
		// ReadAll would start at 512 bytes and grow.
		raw = make([]byte, n)
		_, err = io.ReadFull(body, raw)
	} else {
		raw, err = io.ReadAll(body)
	}
	if err != nil {
		return nil, errs.Invalid("body", jsonProblem(err))
	}
	// JSON decoding turns invalid UTF-8 into U+FFFD: two different keys
	// would become one.
	if !utf8.Valid(raw) {
		return nil, errs.Invalid("body", "must be valid UTF-8")
	}
	return raw, nil
}

// decodeJSON is decodeBody's decoding of a body already read.
func decodeJSON(raw []byte, dst any, example string) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return errs.Invalid("body", "must be a JSON object like "+example+": "+jsonProblem(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return errs.Invalid("body", "must hold one JSON object")
	}
	return nil
}

func (s *Service) post(w http.ResponseWriter, r *http.Request, app string) string {
	var req AcquireRequest
	raw, err := readBody(w, r)
	if err == nil && !parseAcquire(raw, &req) {
		err = decodeJSON(raw, &req, `{"bucket": "checkout", "n": 1}`)
	}
	if err != nil {
		return s.writeError(w, err)
	}
	res, err := s.acquireHTTP(r, app, req)
	if err != nil {
		return s.writeError(w, err)
	}
	h := w.Header()
	s.cfg.Headers.Write(h, res)
	h["Content-Type"] = jsonContentType // shared, never changed: Set would allocate it
	if !res.Allowed {
		// The body says the same; the status lets plain HTTP clients and
		// proxies see a denial without parsing it.
		w.WriteHeader(http.StatusTooManyRequests)
	}
	body := AcquireResponse{
		Allowed: res.Allowed, Remaining: res.Remaining, Limit: res.Limit,
		RetryAfter: seconds(res.RetryAfter), ResetAfter: seconds(res.ResetAfter), WouldDeny: res.WouldDeny, Fallback: res.Fallback,
	}
	_, _ = w.Write(body.appendJSON(make([]byte, 0, 160)))
	if res.Allowed {
		return "ok"
	}
	return "over_limit"
}

// get is the form for nginx auth_request (see HTTPHandler).
func (s *Service) get(w http.ResponseWriter, r *http.Request, app string) string {
	q := r.URL.Query()
	req := AcquireRequest{Bucket: q.Get("bucket"), Key: q.Get("key")}
	switch c := q.Get("critical"); strings.ToLower(c) {
	case "", "false", "0":
	case "true", "1":
		req.Critical = true
	default:
		return s.writeError(w, errs.Invalid("critical", "must be true or false"))
	}
	if v := q.Get("n"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return s.writeError(w, errs.Invalid("n", "must be a whole number from 1 to 1000000000"))
		}
		req.N = n
	}
	res, err := s.acquireHTTP(r, app, req)
	if err != nil {
		return s.writeError(w, err)
	}
	s.cfg.Headers.Write(w.Header(), res)
	if res.Allowed {
		w.Header().Set(DecisionHeader, "allow")
		if res.WouldDeny {
			w.Header().Set(WouldDenyHeader, "true")
		}
		w.WriteHeader(http.StatusOK)
		return "ok"
	}
	if w.Header().Get("Retry-After") == "" {
		w.Header().Set("Retry-After", "1") // a policy refusal: try again soon
	}
	w.Header().Set(DecisionHeader, "deny")
	w.WriteHeader(DeniedStatus)
	return "over_limit"
}

// acquireHTTP validates req and takes the tokens. A refusal by the failure
// policy (fail closed) is a denial, not an error: that is what the service
// chose for an outage.
func (s *Service) acquireHTTP(r *http.Request, app string, req AcquireRequest) (client.Result, error) {
	if req.N == 0 {
		req.N = 1
	}
	var v errs.Validation
	if req.Bucket == "" {
		v.Add("bucket", "is required")
	}
	if req.N < 1 || req.N > 1_000_000_000 {
		v.Add("n", "must be a whole number from 1 to 1000000000")
	}
	if err := CheckKey(req.Key); err != nil {
		return client.Result{}, err
	}
	if err := v.Err(); err != nil {
		return client.Result{}, err
	}
	ctx := r.Context()
	if req.Critical {
		ctx = client.Critical(ctx)
	}
	res, err := s.Acquire(ctx, app, req.Bucket, req.Key, req.N)
	switch {
	case err == nil:
		return res, nil
	case errors.Is(err, client.ErrUnavailable):
		res.Allowed = false
		return res, nil
	case errors.Is(err, client.ErrUnknownBucket):
		return res, fmt.Errorf("no bucket %q: %w", req.Bucket, errs.ErrNotFound)
	case errors.Is(err, client.ErrAppNotAllowed):
		return res, fmt.Errorf("app %q may not take tokens from bucket %q: %w", app, req.Bucket, errs.ErrForbidden)
	case errors.Is(err, client.ErrInvalidKey):
		return res, errs.Invalid("key", "must be 1 to 256 bytes")
	case errors.Is(err, client.ErrExceedsCapacity):
		return res, errs.Invalid("n", fmt.Sprintf("is more than bucket %q can ever grant (capacity %d, less its reserve for a request "+
			"not marked critical)", req.Bucket, res.Limit))
	}
	return res, err
}

func (s *Service) writeError(w http.ResponseWriter, err error) string {
	status := errs.HTTPStatus(err)
	code := errs.Code(err)
	msg := err.Error()
	switch {
	case status == http.StatusInternalServerError:
		s.logs.emit(slog.LevelError, logInternal, "decision request failed", "transport", "http", "err", err)
		msg = "internal error"
	case status == http.StatusUnprocessableEntity:
		s.logs.emit(slog.LevelWarn, logRefusedInvalid, "decision request refused", "transport", "http", "err", err)
	default:
		s.logs.emit(slog.LevelInfo, logRefusedOther, "decision request refused", "transport", "http", "status", status, "err", err)
	}
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="sluice"`)
	}
	var body errorBody
	body.Error.Code, body.Error.Message = code, msg
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
	return resultOf(err)
}

func jsonProblem(err error) string {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return fmt.Sprintf("body larger than %d bytes", maxBody)
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	if len(msg) > 120 {
		msg = msg[:120]
	}
	return msg
}

func seconds(d time.Duration) float64 { return float64(d/time.Microsecond) / 1e6 }
