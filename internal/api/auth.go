package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/accounts"
	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/errs"
)

// caller is the authenticated user of a request and the token they used.
type caller struct {
	user  *accounts.User
	token *accounts.Token
	actor audit.Actor
}

// name is the user name that roles are granted to.
func (c *caller) name() string { return c.user.Username }

// maxTokenLength bounds the Authorization header before any lookup; real
// tokens are far shorter.
const maxTokenLength = 200

// authenticate reads "Authorization: Bearer <token>". Every failure,
// missing, malformed, unknown, revoked or expired, is the same 401, so a
// caller learns nothing about which tokens exist.
func (s *server) authenticate(r *http.Request) (*caller, error) {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	token = strings.TrimSpace(token)
	if h == "" || !ok || !strings.EqualFold(scheme, "Bearer") || token == "" || len(token) > maxTokenLength {
		return nil, errs.ErrUnauthenticated
	}
	tok, user, err := s.Accounts.AuthenticateToken(r.Context(), token)
	if err != nil {
		if errors.Is(err, errs.ErrUnauthenticated) || errors.Is(err, errs.ErrNotFound) {
			s.log.InfoContext(r.Context(), "api: token refused", "addr", remoteAddr(r), "path", r.URL.Path)
			return nil, errs.ErrUnauthenticated
		}
		return nil, fmt.Errorf("authenticate token: %w", err)
	}
	c := &caller{user: user, token: tok, actor: audit.Actor{
		User: user.Username,
		Via:  "api token " + tok.Name,
		Addr: remoteAddr(r),
	}}
	s.auditUse(r.Context(), c, r)
	return c, nil
}

// useInterval is how often a busy token's use is audited: enough to see
// when and from where a token is used without a row per request.
const useInterval = time.Minute

// auditUse writes a "token.use" entry for the first request of a token in
// each minute (per process). Mutations are audited anyway, by their stores.
func (s *server) auditUse(ctx context.Context, c *caller, r *http.Request) {
	now := s.now()
	s.usesMu.Lock()
	last, seen := s.uses[c.token.ID]
	due := !seen || now.Sub(last) >= useInterval
	if due {
		if len(s.uses) > 10000 {
			// Forget old entries rather than grow without bound.
			for id, t := range s.uses {
				if now.Sub(t) >= useInterval {
					delete(s.uses, id)
				}
			}
		}
		s.uses[c.token.ID] = now
	}
	s.usesMu.Unlock()
	if !due {
		return
	}
	err := audit.Write(ctx, s.DB, c.actor, audit.Entry{
		Action: "token.use", ObjectType: "token", ObjectName: c.token.Name,
		Detail: r.Method + " " + r.URL.Path,
	})
	if err != nil {
		// Losing a usage row must not fail the request; the token's
		// last-used time is still kept by accounts.
		s.log.WarnContext(ctx, "api: audit token use", "err", err)
	}
}

// denied audits a refused access and returns the error to answer with:
// the 404 of an invisible object, or a 403.
func (s *server) denied(ctx context.Context, c *caller, r *http.Request, app, objType, objName string, answer error) error {
	err := audit.Write(ctx, s.DB, c.actor, audit.Entry{
		Action: "access.denied", ObjectType: objType, ObjectName: objName, App: app,
		Detail: r.Method + " " + r.URL.Path,
	})
	if err != nil {
		s.log.WarnContext(ctx, "api: audit denied access", "err", err)
	}
	return answer
}
