package api

import (
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/manage"
	"github.com/sluicehq/sluice/internal/router"
)

// maxTokenLength bounds the Authorization header before any lookup; real
// tokens are far shorter.
const maxTokenLength = 200

// authenticate reads "Authorization: Bearer <token>". Every failure,
// missing, malformed, unknown, revoked or expired, is the same 401, so a
// caller learns nothing about which tokens exist.
func (s *server) authenticate(c *gin.Context) (manage.Caller, error) {
	r := c.Request
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	token = strings.TrimSpace(token)
	if h == "" || !ok || !strings.EqualFold(scheme, "Bearer") || token == "" || len(token) > maxTokenLength {
		return manage.Caller{}, errs.ErrUnauthenticated
	}
	return s.svc.TokenCaller(r.Context(), token, router.ClientAddr(c), r.Method+" "+r.URL.Path)
}
