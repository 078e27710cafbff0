package errs

import (
	"context"
	"errors"
	"net/http"
)

// HTTPStatus maps err to the status code the console and the API answer
// with. It is the one place where the vocabulary meets HTTP; anything it does
// not know is a 500 and must be logged by the caller, never shown.
func HTTPStatus(err error) int {
	switch {
	case err == nil:
		return http.StatusOK
	case errors.Is(err, ErrInvalid):
		return http.StatusUnprocessableEntity
	case errors.Is(err, ErrUnauthenticated):
		return http.StatusUnauthorized
	case errors.Is(err, ErrForbidden):
		return http.StatusForbidden
	case errors.Is(err, ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, ErrStale):
		return http.StatusPreconditionFailed
	case errors.Is(err, ErrConflict):
		return http.StatusConflict
	case errors.Is(err, ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}

// Code is the short machine-readable name of err's kind, used in API error
// bodies: "invalid", "unauthenticated", "forbidden", "not_found", "conflict",
// "precondition_failed" (a stale version), "unavailable" or "internal".
func Code(err error) string {
	switch HTTPStatus(err) {
	case http.StatusUnprocessableEntity:
		return "invalid"
	case http.StatusUnauthorized:
		return "unauthenticated"
	case http.StatusForbidden:
		return "forbidden"
	case http.StatusNotFound:
		return "not_found"
	case http.StatusConflict:
		return "conflict"
	case http.StatusPreconditionFailed:
		return "precondition_failed"
	case http.StatusServiceUnavailable:
		return "unavailable"
	case http.StatusOK:
		return "ok"
	default:
		return "internal"
	}
}
