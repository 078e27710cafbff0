package main

import (
	"context"
	"log/slog"
	"strconv"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/redisscript"
)

// benchKeys is the number of keys the keyed case spreads its calls over.
const benchKeys = 10_000

// sluiceKeyed is Sluice's keyed acquire: one keyed bucket, every call for
// the next of benchKeys keys. Each key allows the workload's capacity and
// refills at 1 per second, so that keys in use stay in Redis as they do
// at a realistic per-key rate (at the workload's rate, a key's state
// would expire a microsecond after each call and be created again).
type sluiceKeyed struct {
	conn
	keys []string
	next atomic.Uint64
}

func newSluiceKeyed(ctx context.Context, opts *redis.Options, w workload, extra ...client.Option) (*sluiceKeyed, error) {
	rdb := redis.NewClient(opts)
	cfg := redisscript.Config{Name: "keyed", ID: 1, Version: 1, Capacity: w.capacity, PermitsMicro: 1_000_000,
		PeriodSeconds: 1, Apps: []string{benchApp}}
	if _, err := redisscript.ApplyKeyed(ctx, rdb, redisscript.Keyspace{Prefix: w.prefix}, cfg, true); err != nil {
		rdb.Close()
		return nil, err
	}
	base := []client.Option{client.WithKeyPrefix(w.prefix), client.WithLogger(slog.New(slog.DiscardHandler))}
	lim, err := client.New(rdb, benchApp, append(base, extra...)...)
	if err != nil {
		rdb.Close()
		return nil, err
	}
	s := &sluiceKeyed{conn: conn{rdb: rdb, lim: lim}}
	for i := range benchKeys {
		s.keys = append(s.keys, "user-"+strconv.Itoa(i))
	}
	return s, nil
}

func (s *sluiceKeyed) name() string { return "sluice keyed" }

func (s *sluiceKeyed) acquire(ctx context.Context, _ int) (bool, error) {
	key := s.keys[s.next.Add(1)%benchKeys]
	return fromRedis(s.lim.AcquireKey(ctx, "keyed", key, 1))
}
