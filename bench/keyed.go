package main

import (
	"context"
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
	keys   []string
	states []string // the keys' state keys in Redis
	next   atomic.Uint64
}

func newSluiceKeyed(ctx context.Context, opts *redis.Options, w workload, extra ...client.Option) (*sluiceKeyed, error) {
	c, err := newConn(ctx, opts, w, func(ctx context.Context, rdb *redis.Client) error {
		cfg := redisscript.Config{Name: "keyed", ID: 1, Version: 1, Capacity: w.capacity, PermitsMicro: 1_000_000,
			PeriodSeconds: 1, Apps: []string{benchApp}}
		_, err := redisscript.ApplyKeyed(ctx, rdb, redisscript.Keyspace{Prefix: w.prefix}, cfg, true)
		return err
	}, extra...)
	if err != nil {
		return nil, err
	}
	s := &sluiceKeyed{conn: c}
	ks := redisscript.Keyspace{Prefix: w.prefix}
	for i := range benchKeys {
		key := "user-" + strconv.Itoa(i)
		s.keys = append(s.keys, key)
		s.states = append(s.states, ks.Keyed("keyed", key).State)
	}
	return s, nil
}

// settle deletes the keys' states once the case is measured. Left to
// expire, ten thousand of them would keep Redis's expiry cycle busy
// during whichever case runs next.
func (s *sluiceKeyed) settle(ctx context.Context) error {
	pipe := s.rdb.Pipeline()
	for states := s.states; len(states) > 0; {
		n := min(len(states), 500)
		pipe.Del(ctx, states[:n]...)
		states = states[n:]
	}
	_, err := pipe.Exec(ctx)
	return err
}

func (s *sluiceKeyed) name() string { return "sluice keyed" }

func (s *sluiceKeyed) acquire(ctx context.Context, _ int) (bool, error) {
	key := s.keys[s.next.Add(1)%benchKeys]
	return fromRedis(s.lim.AcquireKey(ctx, "keyed", key, 1))
}
