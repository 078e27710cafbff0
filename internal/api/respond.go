package api

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/router"
)

// apiError is an error that is already an HTTP answer: the request itself
// is wrong (400, 413, 415, 428), a precondition failed (412), or the route
// does not exist. Domain errors come from the stores as the errs
// vocabulary and are mapped by errs.HTTPStatus instead.
type apiError struct {
	status  int
	code    string
	message string
	fields  []errs.FieldError
}

func (e *apiError) Error() string { return e.message }

func badRequest(format string, args ...any) error {
	return &apiError{status: http.StatusBadRequest, code: "bad_request", message: fmt.Sprintf(format, args...)}
}

// badParam reports an invalid query parameter or header as a 400 with a
// field error naming it.
func badParam(name, reason string) error {
	return &apiError{status: http.StatusBadRequest, code: "bad_request",
		message: "invalid " + name + ": " + reason,
		fields:  []errs.FieldError{{Field: name, Reason: reason}}}
}

// errorBody is the JSON shape of every error response.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string            `json:"code"`
	Message string            `json:"message"`
	Fields  []errs.FieldError `json:"fields,omitempty"`
}

// messages are what callers see for each kind of domain error whose own
// text is not meant for them (it may name hosts or SQL).
var messages = map[string]string{
	"unauthenticated": "a valid API token is required: send \"Authorization: Bearer <token>\"",
	"forbidden":       "your roles do not allow this",
	"not_found":       "not found",
	"invalid":         "invalid input; see fields",
	"unavailable":     "a store Sluice depends on is unavailable; try again shortly",
	"internal":        "internal error",
}

// writeError answers err as a JSON error body. The mapping of domain errors
// to status codes is errs.HTTPStatus, the same one the console uses.
func (s *server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var body errorBody
	var status int
	var ae *apiError
	if errors.As(err, &ae) {
		status = ae.status
		body.Error = errorDetail{Code: ae.code, Message: ae.message, Fields: ae.fields}
	} else {
		status = errs.HTTPStatus(err)
		code := errs.Code(err)
		body.Error = errorDetail{Code: code, Message: messages[code]}
		switch code {
		case "invalid":
			if v := errs.Fields(err); v != nil {
				body.Error.Fields = v.Fields
			}
		case "internal":
			s.log.ErrorContext(r.Context(), "api request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		case "unavailable":
			s.log.WarnContext(r.Context(), "api request: store unavailable", "method", r.Method, "path", r.URL.Path, "err", err)
		}
		if msg, ok := errs.PublicMessage(err); ok {
			body.Error.Message = msg
		}
	}
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="sluice"`)
	}
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "5")
	}
	writeJSON(w, status, body)
}

// writeJSON writes v with status. Encoding cannot fail for the API's own
// types; a write error means the client went away.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(true)
	if err := enc.Encode(v); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString(`{"error":{"code":"internal","message":"internal error"}}` + "\n")
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// decode reads the JSON request body into v strictly: the media type must
// be JSON, unknown fields and trailing data are refused, and every
// problem is a 400 (413 for a body over router.MaxBodyBytes) whose message says
// what is wrong and where.
func decode(r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && mt != "application/merge-patch+json") {
			return &apiError{status: http.StatusUnsupportedMediaType, code: "unsupported_media_type",
				message: "the body must be JSON (Content-Type: application/json)"}
		}
	}
	if r.Body == nil {
		return badRequest("a JSON body is required")
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return decodeError(err)
		}
		return badRequest("malformed JSON: the body must hold exactly one JSON object")
	}
	return nil
}

func decodeError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return &apiError{status: http.StatusRequestEntityTooLarge, code: "too_large",
			message: fmt.Sprintf("the body must be at most %d bytes", router.MaxBodyBytes)}
	case errors.Is(err, io.EOF):
		return badRequest("a JSON body is required")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("malformed JSON: the body ends too early")
	case errors.As(err, &syn):
		return badRequest("malformed JSON at byte %d: %s", syn.Offset, syn.Error())
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			return badRequest("malformed JSON: the body must be a JSON object")
		}
		return &apiError{status: http.StatusBadRequest, code: "bad_request",
			message: fmt.Sprintf("malformed JSON: %s must be %s, not %s", field, jsonType(typ.Type.Kind().String()), typ.Value),
			fields:  []errs.FieldError{{Field: field, Reason: "must be " + jsonType(typ.Type.Kind().String())}}}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return &apiError{status: http.StatusBadRequest, code: "bad_request",
			message: fmt.Sprintf("unknown field %q", name),
			fields:  []errs.FieldError{{Field: name, Reason: "is not a field of this request"}}}
	default:
		return badRequest("malformed JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
}

// jsonType names a Go kind as the JSON type a client should send.
func jsonType(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "a whole number"
	case "float32", "float64":
		return "a number"
	case "bool":
		return "true or false"
	case "slice", "array":
		return "an array"
	case "struct", "map", "ptr":
		return "an object"
	}
	return "another type"
}

// writeVersioned writes an app or a bucket with its version as ETag and,
// for a created one, its Location.
func writeVersioned(w http.ResponseWriter, status int, location string, version int64, v any) {
	if location != "" {
		w.Header().Set("Location", location)
	}
	w.Header().Set("ETag", etag(version))
	writeJSON(w, status, v)
}

// stampJSON ends the API's views of apps, buckets and overrides: the
// version their ETag carries, and who created and last changed them, and
// when. Its key order (each "by" before its "at") is the API's own, not
// the stored stamp's.
type stampJSON struct {
	Version   int64     `json:"version"`
	CreatedBy string    `json:"created_by"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedBy string    `json:"updated_by"`
	UpdatedAt time.Time `json:"updated_at"`
}

func toStampJSON(s database.Stamp) stampJSON {
	return stampJSON{Version: s.Version, CreatedBy: s.CreatedBy, CreatedAt: s.CreatedAt, UpdatedBy: s.UpdatedBy, UpdatedAt: s.UpdatedAt}
}

// etag renders a version as the strong entity tag of an app or a bucket.
func etag(version int64) string { return `"` + strconv.FormatInt(version, 10) + `"` }

// ifMatch reads the If-Match header of a request that changes an object.
// It returns the version the caller read, or 0 for "*" (whatever is
// current). A missing header is 428: an update must say what it is based
// on, so that nothing is silently overwritten.
func ifMatch(r *http.Request) (int64, error) {
	values := r.Header.Values("If-Match")
	if len(values) == 0 {
		return 0, &apiError{status: http.StatusPreconditionRequired, code: "precondition_required",
			message: "send If-Match with the ETag from your GET (or \"*\" to act on whatever version is current)"}
	}
	v := strings.TrimSpace(strings.Join(values, ","))
	if v == "*" {
		return 0, nil
	}
	if strings.Contains(v, ",") {
		return 0, badParam("If-Match", "must be one entity tag, as returned in ETag, or *")
	}
	if strings.HasPrefix(v, "W/") {
		return 0, badParam("If-Match", "weak entity tags never match; send the ETag as returned")
	}
	if len(v) < 3 || v[0] != '"' || v[len(v)-1] != '"' {
		return 0, badParam("If-Match", `must be a quoted entity tag such as "3", as returned in ETag, or *`)
	}
	n, err := strconv.ParseInt(v[1:len(v)-1], 10, 64)
	if err != nil || n < 1 {
		// A well-formed tag Sluice never issued matches nothing.
		return 0, preconditionFailed("the If-Match entity tag matches no version")
	}
	return n, nil
}

// precondition reads what a change of an object carries: If-Match and,
// unless body is nil, the JSON body. When either is wrong, a caller whom
// access refuses is refused before either is looked at (refusedFirst).
func precondition(r *http.Request, body any, access func() error) (int64, error) {
	version, err := ifMatch(r)
	if err == nil && body != nil {
		err = decode(r, body)
	}
	if err != nil {
		return 0, refusedFirst(err, access)
	}
	return version, nil
}

func preconditionFailed(message string) error {
	return &apiError{status: http.StatusPreconditionFailed, code: "precondition_failed", message: message}
}

// Page sizes of every list.
const (
	defaultLimit = database.DefaultPageSize
	maxLimit     = database.MaxPageSize
)

// page reads ?limit= and ?cursor=. The cursor is opaque to clients: it is
// the store's cursor, tagged with the list it belongs to and base64url
// encoded, so a cursor from one list is refused by another.
func page(r *http.Request, kind string) (cursor string, limit int, err error) {
	q := r.URL.Query()
	limit = defaultLimit
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxLimit {
			return "", 0, badParam("limit", fmt.Sprintf("must be a whole number from 1 to %d", maxLimit))
		}
		limit = n
	}
	if s := q.Get("cursor"); s != "" {
		raw, err := base64.RawURLEncoding.DecodeString(s)
		rest, ok := strings.CutPrefix(string(raw), kind+":")
		if err != nil || !ok || rest == "" {
			return "", 0, badParam("cursor", "must be a next_cursor returned by this list")
		}
		cursor = rest
	}
	return cursor, limit, nil
}

// writePage writes one page of a list: its items under key, the cursor
// of the next page (left out on the last page) and the total.
func writePage[T, J any](w http.ResponseWriter, key, next string, total int, items []T, render func(T) J) {
	out := make([]J, 0, len(items))
	for _, it := range items {
		out = append(out, render(it))
	}
	body := map[string]any{key: out, "total": total}
	if next != "" {
		body["next_cursor"] = next
	}
	writeJSON(w, http.StatusOK, body)
}

// nextCursor encodes the store's cursor of the next page; "" ends the list.
func nextCursor(kind, next string) string {
	if next == "" {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString([]byte(kind + ":" + next))
}

// query returns the single value of a query parameter, bounded in length.
func query(r *http.Request, name string, max int) (string, error) {
	values := r.URL.Query()[name]
	if len(values) > 1 {
		return "", badParam(name, "must be given at most once")
	}
	if len(values) == 0 {
		return "", nil
	}
	if len(values[0]) > max {
		return "", badParam(name, fmt.Sprintf("must be at most %d characters", max))
	}
	return values[0], nil
}
