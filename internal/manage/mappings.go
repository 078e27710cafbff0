package manage

import (
	"context"
	"errors"
	"time"

	"github.com/sluicehq/sluice/internal/apptokens"
	"github.com/sluicehq/sluice/internal/descriptors"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/rbac"
)

// Mappings lists the descriptor mappings of app, for anyone who may see it.
func (s *Service) Mappings(ctx context.Context, c Caller, app string) ([]*descriptors.Mapping, error) {
	a, err := s.appFor(ctx, c, app)
	if err != nil {
		return nil, err
	}
	return descriptors.NewStore(s.db).List(ctx, a.Name)
}

// Mapping returns mapping id of app, for anyone who may see the app. A
// mapping of another app answers like a missing one.
func (s *Service) Mapping(ctx context.Context, c Caller, app string, id int64) (*descriptors.Mapping, error) {
	a, err := s.appFor(ctx, c, app)
	if err != nil {
		return nil, err
	}
	return s.mappingOf(ctx, a.Name, id)
}

func (s *Service) mappingOf(ctx context.Context, app string, id int64) (*descriptors.Mapping, error) {
	m, err := descriptors.NewStore(s.db).Get(ctx, id)
	if errors.Is(err, errs.ErrNotFound) || (err == nil && m.App != app) {
		return nil, errs.NotFoundf("descriptor mapping %d of app %q not found", id, app)
	}
	return m, err
}

// SaveMapping creates (ID 0) or updates a descriptor mapping of App.
// Version is the version the caller read, for an update.
type SaveMapping struct {
	App         string
	ID          int64
	Version     int64
	Domain      string
	Entries     []descriptors.Entry
	Bucket      string
	KeyFrom     string
	Description string
}

// CreateMapping adds a descriptor mapping to an app; it needs the owner
// role on the app.
func (s *Service) CreateMapping(ctx context.Context, c Caller, req SaveMapping) (*descriptors.Mapping, error) {
	a, err := s.appAction(ctx, c, req.App, rbac.ActionEdit, "mapping descriptors")
	if err != nil {
		return nil, err
	}
	m := &descriptors.Mapping{App: a.Name, Domain: req.Domain, Entries: req.Entries, Bucket: req.Bucket,
		KeyFrom: req.KeyFrom, Description: req.Description}
	st := descriptors.NewStore(s.db)
	if err := st.Create(ctx, c.Actor(), m); err != nil {
		return nil, err
	}
	return m, nil
}

// UpdateMapping changes a descriptor mapping of an app; it needs the owner
// role on the app. A Version other than the stored one gives an
// *errs.Stale (0 means whatever is stored).
func (s *Service) UpdateMapping(ctx context.Context, c Caller, req SaveMapping) (*descriptors.Mapping, error) {
	a, err := s.appAction(ctx, c, req.App, rbac.ActionEdit, "mapping descriptors")
	if err != nil {
		return nil, err
	}
	old, err := s.mappingOf(ctx, a.Name, req.ID)
	if err != nil {
		return nil, err
	}
	m := *old
	if req.Version != 0 {
		m.Version = req.Version // the store compares it under the row lock
	}
	m.Domain, m.Entries, m.Bucket, m.KeyFrom, m.Description = req.Domain, req.Entries, req.Bucket, req.KeyFrom, req.Description
	if err := descriptors.NewStore(s.db).Update(ctx, c.Actor(), &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// DeleteMapping removes descriptor mapping ID of App; Version as for
// UpdateMapping.
type DeleteMapping struct {
	App     string
	ID      int64
	Version int64
}

// DeleteMapping needs the owner role on the app.
func (s *Service) DeleteMapping(ctx context.Context, c Caller, req DeleteMapping) error {
	a, err := s.appAction(ctx, c, req.App, rbac.ActionEdit, "mapping descriptors")
	if err != nil {
		return err
	}
	if _, err := s.mappingOf(ctx, a.Name, req.ID); err != nil {
		return err
	}
	return descriptors.NewStore(s.db).Delete(ctx, c.Actor(), req.ID, req.Version)
}

// AppTokens lists the credentials of app, revoked ones included; it needs
// the owner role, since a token's name and prefix help nobody else.
func (s *Service) AppTokens(ctx context.Context, c Caller, app string) ([]*apptokens.Token, error) {
	a, err := s.appAction(ctx, c, app, rbac.ActionManage, "the tokens")
	if err != nil {
		return nil, err
	}
	return apptokens.NewStore(s.db).List(ctx, a.Name)
}

// CreateAppToken makes a credential for App named Name, expiring at
// Expires if set.
type CreateAppToken struct {
	App     string
	Name    string
	Expires *time.Time
}

// CreateAppToken needs the owner role on the app. It returns the secret,
// which is shown once and never stored.
func (s *Service) CreateAppToken(ctx context.Context, c Caller, req CreateAppToken) (string, *apptokens.Token, error) {
	a, err := s.appAction(ctx, c, req.App, rbac.ActionManage, "the tokens")
	if err != nil {
		return "", nil, err
	}
	secret, t, err := apptokens.NewStore(s.db).Create(ctx, c.Actor(), a.Name, req.Name, req.Expires)
	return secret, t, err
}

// RevokeAppToken revokes token id of app; it needs the owner role.
func (s *Service) RevokeAppToken(ctx context.Context, c Caller, app string, id int64) error {
	a, err := s.appAction(ctx, c, app, rbac.ActionManage, "the tokens")
	if err != nil {
		return err
	}
	return apptokens.NewStore(s.db).Revoke(ctx, c.Actor(), a.Name, id)
}
