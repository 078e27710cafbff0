package decision

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/internal/apptokens"
	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/descriptors"
)

// snapshot is everything a decision reads besides Redis: who may call and
// how descriptors map to buckets. It is replaced whole, never modified.
type snapshot struct {
	revision    int64
	index       *descriptors.Index
	credentials map[string]apptokens.Credential
	// limits are the buckets' rates, for the limit Envoy reports.
	limits   map[string]EnvoyLimit
	loadedAt time.Time
}

// Sources are the MySQL stores a Service reads.
type Sources struct {
	Mappings *descriptors.Store
	Tokens   *apptokens.Store
	Buckets  *buckets.Store
}

func (src Sources) loadConfig(ctx context.Context) (*snapshot, error) {
	ms, rev, err := src.Mappings.All(ctx)
	if err != nil {
		return nil, err
	}
	creds, err := src.Tokens.Active(ctx)
	if err != nil {
		return nil, err
	}
	return &snapshot{revision: rev, index: descriptors.NewIndex(ms), credentials: creds}, nil
}

func (src Sources) loadLimits(ctx context.Context) (map[string]EnvoyLimit, error) {
	bs, err := src.Buckets.Definitions(ctx)
	if err != nil {
		return nil, fmt.Errorf("load bucket rates: %w", err)
	}
	out := make(map[string]EnvoyLimit, len(bs))
	for _, b := range bs {
		if b.Kind == buckets.KindQuota {
			out[b.Name] = envoyLimitOfQuota(b)
			continue
		}
		out[b.Name] = envoyLimitOf(b.Rate)
	}
	return out, nil
}
