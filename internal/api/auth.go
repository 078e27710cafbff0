package api

import (
	"net/http"
	"strings"

	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/manage"
)

// maxTokenLength bounds the Authorization header before any lookup; real
// tokens are far shorter.
const maxTokenLength = 200

// authenticate reads "Authorization: Bearer <token>". Every failure,
// missing, malformed, unknown, revoked or expired, is the same 401, so a
// caller learns nothing about which tokens exist.
func (s *server) authenticate(r *http.Request) (manage.Caller, error) {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	token = strings.TrimSpace(token)
	if h == "" || !ok || !strings.EqualFold(scheme, "Bearer") || token == "" || len(token) > maxTokenLength {
		return manage.Caller{}, errs.ErrUnauthenticated
	}
	return s.svc.TokenCaller(r.Context(), token, remoteAddr(r), r.Method+" "+r.URL.Path)
}
