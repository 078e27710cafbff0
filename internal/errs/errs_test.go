package errs_test

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/sluicehq/sluice/internal/errs"
)

func TestHTTPStatus(t *testing.T) {
	var v errs.Validation
	v.Add("name", "must not be empty")
	tests := []struct {
		err  error
		want int
		code string
	}{
		{nil, http.StatusOK, "ok"},
		{v.Err(), http.StatusUnprocessableEntity, "invalid"},
		{fmt.Errorf("create bucket: %w", errs.Invalid("rate", "must be positive")), http.StatusUnprocessableEntity, "invalid"},
		{fmt.Errorf("bucket x: %w", errs.ErrNotFound), http.StatusNotFound, "not_found"},
		{fmt.Errorf("stale: %w", errs.ErrConflict), http.StatusConflict, "conflict"},
		{errs.ErrForbidden, http.StatusForbidden, "forbidden"},
		{errs.ErrUnauthenticated, http.StatusUnauthorized, "unauthenticated"},
		{fmt.Errorf("%w: dial tcp: refused", errs.ErrUnavailable), http.StatusServiceUnavailable, "unavailable"},
		{errors.New("boom"), http.StatusInternalServerError, "internal"},
	}
	for _, tt := range tests {
		if got := errs.HTTPStatus(tt.err); got != tt.want {
			t.Errorf("HTTPStatus(%v) = %d, want %d", tt.err, got, tt.want)
		}
		if got := errs.Code(tt.err); got != tt.code {
			t.Errorf("Code(%v) = %q, want %q", tt.err, got, tt.code)
		}
	}
}

func TestValidation(t *testing.T) {
	var v errs.Validation
	if v.Err() != nil {
		t.Fatal("empty validation must be a nil error")
	}
	v.Add("max_permits", "must be between 1 and 1000000000")
	v.Add("rate", "must be positive")
	err := fmt.Errorf("save: %w", v.Err())
	if !errors.Is(err, errs.ErrInvalid) {
		t.Fatal("a validation must match ErrInvalid")
	}
	got := errs.Fields(err)
	if got == nil || got.For("rate") != "must be positive" || got.For("name") != "" {
		t.Fatalf("Fields(err) = %+v", got)
	}
	want := "invalid input: max_permits must be between 1 and 1000000000; rate must be positive"
	if v.Error() != want {
		t.Fatalf("Error() = %q, want %q", v.Error(), want)
	}
}
