package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/manage"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/usage"
)

// topKeysJSON is the body of GET /buckets/{bucket}/top-keys.
type topKeysJSON struct {
	Bucket string           `json:"bucket"`
	Window string           `json:"window"`
	Since  time.Time        `json:"since"`
	Denied []usage.KeyCount `json:"denied"`
	Taken  []usage.KeyCount `json:"taken"`
}

// topKeys: GET /buckets/{bucket}/top-keys?window=hour|day&limit=, the
// keys of a keyed bucket denied most and taking most.
func (s *server) topKeys(w http.ResponseWriter, r *http.Request, c manage.Caller) error {
	win, err := query(r, "window", 4)
	if err != nil {
		return err
	}
	window := usage.Hour
	switch win {
	case "", "hour":
	case "day":
		window = usage.Day
	default:
		return badParam("window", `must be "hour" or "day"`)
	}
	limit := usage.DefaultTopKeys
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > usage.MaxTopKeys {
			return badParam("limit", fmt.Sprintf("must be a whole number from 1 to %d", usage.MaxTopKeys))
		}
		limit = n
	}
	top, err := s.svc.TopKeys(r.Context(), c, r.PathValue("bucket"), window, limit)
	if err != nil {
		return err
	}
	out := topKeysJSON{Bucket: r.PathValue("bucket"), Window: window.String(), Since: top.Since,
		Denied: top.Denied, Taken: top.Taken}
	if out.Denied == nil {
		out.Denied = []usage.KeyCount{}
	}
	if out.Taken == nil {
		out.Taken = []usage.KeyCount{}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// keyStateJSON is the body of GET /buckets/{bucket}/key-state.
type keyStateJSON struct {
	Bucket     string        `json:"bucket"`
	Key        string        `json:"key"`
	Override   *overrideJSON `json:"override"`
	MaxPermits int64         `json:"max_permits"`
	Rate       buckets.Rate  `json:"rate"`
	Shadow     bool          `json:"shadow"`
	Reserve    int64         `json:"reserve"`
	Tokens     json.Number   `json:"tokens"`
	FullAt     *time.Time    `json:"full_at,omitempty"`
	RedisTime  time.Time     `json:"redis_time"`
}

// keyState: GET /buckets/{bucket}/key-state?key=, the limit that applies
// to one key of a keyed bucket and the tokens it holds now.
func (s *server) keyState(w http.ResponseWriter, r *http.Request, c manage.Caller) error {
	key, err := query(r, "key", redisscript.MaxKeyLength)
	if err != nil {
		return err
	}
	if key == "" {
		return badParam("key", "is required")
	}
	b, st, err := s.svc.KeyState(r.Context(), c, r.PathValue("bucket"), key)
	if err != nil {
		return err
	}
	out := keyStateJSON{Bucket: b.Name, Key: st.Key, MaxPermits: st.MaxPermits, Rate: st.Rate, Shadow: st.Shadow,
		Reserve: st.Reserve, Tokens: tokens(st.Tokens), RedisTime: st.RedisTime.UTC()}
	if st.Override != nil {
		o := toOverrideJSON(st.Override)
		out.Override = &o
	}
	if !st.Full {
		t := st.FullAt.UTC()
		out.FullAt = &t
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
