package api

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/manage"
)

// stateJSON is a bucket's live state in Redis next to its MySQL version.
type stateJSON struct {
	Bucket string `json:"bucket"`
	// SyncStatus compares Redis with MySQL: in_sync, pending or ahead.
	SyncStatus   manage.SyncStatus `json:"sync_status"`
	MySQLVersion int64             `json:"mysql_version"`
	// InRedis is false until the sync worker has written the bucket.
	InRedis bool `json:"in_redis"`
	// Keyed buckets have their tokens per key: no one count to show.
	Keyed bool `json:"keyed,omitempty"`
	// KeyGroups and KeyGroupsInSync, of a keyed bucket: its key groups,
	// and how many hold the MySQL version (in_sync needs all of them).
	KeyGroups       int         `json:"key_groups,omitempty"`
	KeyGroupsInSync *int        `json:"key_groups_in_sync,omitempty"`
	RedisVersion    int64       `json:"redis_version,omitempty"`
	Capacity        int64       `json:"capacity,omitempty"`
	Rate            string      `json:"rate,omitempty"`
	AllowedApps     []string    `json:"allowed_apps,omitempty"`
	Tokens          json.Number `json:"tokens,omitempty"`
	// Reserve is the tokens Redis keeps for critical requests, ReserveLeft
	// how many of them are there now.
	Reserve     int64  `json:"reserve"`
	ReserveLeft *int64 `json:"reserve_left,omitempty"`
	// LastRefill is when an acquire last refilled the bucket, RedisTime
	// the Redis clock at this read; both come from Redis TIME.
	LastRefill *time.Time `json:"last_refill,omitempty"`
	// SlotsInUse and NextSlotExpiry, of a shared concurrency limit: the
	// slots held (Tokens is then the free ones) and when the first of
	// them expires.
	SlotsInUse     *int64     `json:"slots_in_use,omitempty"`
	NextSlotExpiry *time.Time `json:"next_slot_expiry,omitempty"`
	RedisTime      time.Time  `json:"redis_time"`
}

// bucketState: GET /buckets/{bucket}/state, for anyone who can see the
// bucket.
func (s *server) bucketState(w http.ResponseWriter, r *http.Request, c manage.Caller) error {
	b, st, err := s.svc.BucketState(r.Context(), c, r.PathValue("bucket"))
	if err != nil {
		return err
	}
	out := stateJSON{Bucket: b.Name, MySQLVersion: b.Version, InRedis: st.InRedis, Keyed: st.Keyed,
		RedisTime: st.RedisTime.UTC(), SyncStatus: st.Sync}
	if st.Keyed {
		out.KeyGroups, out.KeyGroupsInSync = st.Groups, &st.GroupsInSync
	}
	if st.InRedis {
		cfg := st.Config
		out.RedisVersion = cfg.Version
		out.Capacity = cfg.Capacity
		out.Rate = rateText(cfg.PermitsMicro, cfg.PeriodSeconds)
		out.AllowedApps = cfg.Apps
		out.Reserve = cfg.Reserve
	}
	if st.InRedis && !st.Keyed {
		out.Tokens = tokens(st.Tokens)
		left := st.Config.ReserveLeft(st.Tokens)
		out.ReserveLeft = &left
		if !st.Refilled.IsZero() {
			t := st.Refilled.UTC()
			out.LastRefill = &t
		}
	}
	if st.Slots {
		out.SlotsInUse = &st.InUse
		if !st.NextExpiry.IsZero() {
			t := st.NextExpiry.UTC()
			out.NextSlotExpiry = &t
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// tokens renders a token count with at most 6 decimals, the precision of
// rates; a non-finite value (a corrupt hash) is left out.
func tokens(f float64) json.Number {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return ""
	}
	return json.Number(strconv.FormatFloat(math.Round(f*1e6)/1e6, 'f', -1, 64))
}

// rateText renders a Redis config's rate in the canonical text of buckets.
func rateText(permitsMicro, periodSeconds int64) string {
	return buckets.Rate{PermitsMicro: permitsMicro, Period: time.Duration(periodSeconds) * time.Second}.String()
}
