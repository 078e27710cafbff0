// Package redisconn turns configuration (flags and SLUICE_REDIS_*
// environment variables) into a go-redis client for one Redis server, a
// Sentinel-managed primary or a Redis Cluster, so that every Sluice binary
// reaches Redis the same way.
package redisconn

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/settings"
)

// Environment variables of the Redis settings.
const (
	EnvAddr             = "SLUICE_REDIS_ADDR"
	EnvSentinelMaster   = "SLUICE_REDIS_SENTINEL_MASTER"
	EnvSentinelAddrs    = "SLUICE_REDIS_SENTINEL_ADDRS"
	EnvCluster          = "SLUICE_REDIS_CLUSTER"
	EnvUsername         = "SLUICE_REDIS_USERNAME"
	EnvPassword         = "SLUICE_REDIS_PASSWORD"
	EnvSentinelPassword = "SLUICE_REDIS_SENTINEL_PASSWORD"
	EnvDB               = "SLUICE_REDIS_DB"
)

// Options say how to reach Redis. Exactly one mode is set: Addr (one
// server), SentinelMaster with SentinelAddrs, or ClusterAddrs.
type Options struct {
	// Addr is a single server's host:port.
	Addr string
	// SentinelMaster is the master name the sentinels at SentinelAddrs monitor.
	SentinelMaster string
	SentinelAddrs  []string
	// ClusterAddrs are seed nodes of a Redis Cluster.
	ClusterAddrs []string

	// Username and Password authenticate to the data nodes (ACL or
	// requirepass); SentinelPassword to the sentinels. They are read from
	// the environment only, never flags, so they do not show in `ps`.
	Username         string
	Password         string
	SentinelPassword string
	// DB selects a logical database; a cluster has only 0.
	DB int

	// DialTimeout bounds connecting; 0 means 2 s.
	DialTimeout time.Duration
}

// Bind binds the Redis settings to s: each mode's flag and variable, the
// database, and the credentials, which are secrets read from the
// environment only. Call Validate after s is parsed.
func (o *Options) Bind(s *settings.Set) {
	s.String(&o.Addr, "redis-addr", EnvAddr, "Redis host:port of a single server; required in one of the three forms")
	s.String(&o.SentinelMaster, "redis-sentinel-master", EnvSentinelMaster, "master name monitored by Redis Sentinel")
	s.List(&o.SentinelAddrs, "redis-sentinel-addrs", EnvSentinelAddrs, "comma-separated sentinel addresses")
	s.List(&o.ClusterAddrs, "redis-cluster", EnvCluster, "comma-separated Redis Cluster seed addresses")
	s.Int(&o.DB, "redis-db", EnvDB, "Redis logical database (not for a cluster)")
	s.String(&o.Username, "", EnvUsername, "Redis user name (ACL)")
	s.Secret(&o.Password, "", EnvPassword, "Redis password")
	s.Secret(&o.SentinelPassword, "", EnvSentinelPassword, "password of the sentinels")
}

// Mode names the way Options reach Redis: "single", "sentinel" or "cluster".
func (o Options) Mode() string {
	switch {
	case len(o.ClusterAddrs) > 0:
		return "cluster"
	case o.SentinelMaster != "" || len(o.SentinelAddrs) > 0:
		return "sentinel"
	default:
		return "single"
	}
}

// Validate reports a configuration that cannot work, naming the variables
// or flags to fix.
func (o Options) Validate() error {
	modes := 0
	if o.Addr != "" {
		modes++
	}
	if o.SentinelMaster != "" || len(o.SentinelAddrs) > 0 {
		modes++
	}
	if len(o.ClusterAddrs) > 0 {
		modes++
	}
	switch {
	case modes == 0:
		return fmt.Errorf("redis is not configured: set %s (one server), %s and %s (sentinel), or %s (cluster)",
			EnvAddr, EnvSentinelMaster, EnvSentinelAddrs, EnvCluster)
	case modes > 1:
		return fmt.Errorf("redis is configured more than one way: set only one of %s, %s/%s or %s",
			EnvAddr, EnvSentinelMaster, EnvSentinelAddrs, EnvCluster)
	case o.Mode() == "sentinel" && o.SentinelMaster == "":
		return fmt.Errorf("redis sentinel: %s is required with %s", EnvSentinelMaster, EnvSentinelAddrs)
	case o.Mode() == "sentinel" && len(o.SentinelAddrs) == 0:
		return fmt.Errorf("redis sentinel: %s is required with %s", EnvSentinelAddrs, EnvSentinelMaster)
	case o.Mode() == "cluster" && o.DB != 0:
		return errors.New("redis cluster has only database 0: unset " + EnvDB)
	case o.DB < 0:
		return fmt.Errorf("%s must not be negative", EnvDB)
	}
	for _, a := range append(append([]string{o.Addr}, o.SentinelAddrs...), o.ClusterAddrs...) {
		if a == "" {
			continue
		}
		if i := strings.LastIndexByte(a, ':'); i <= 0 || i == len(a)-1 {
			return fmt.Errorf("redis address %q: want host:port", a)
		}
	}
	return nil
}

// String describes the target without secrets, for logs and errors.
func (o Options) String() string {
	switch o.Mode() {
	case "cluster":
		return "cluster " + strings.Join(o.ClusterAddrs, ",")
	case "sentinel":
		return fmt.Sprintf("sentinel master %q via %s", o.SentinelMaster, strings.Join(o.SentinelAddrs, ","))
	default:
		return o.Addr
	}
}

// Client returns a client for o without contacting Redis. The caller closes it.
func (o Options) Client() (redis.UniversalClient, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	dial := o.DialTimeout
	if dial == 0 {
		dial = 2 * time.Second
	}
	switch o.Mode() {
	case "cluster":
		return redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: o.ClusterAddrs, Username: o.Username, Password: o.Password, DialTimeout: dial,
		}), nil
	case "sentinel":
		return redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: o.SentinelMaster, SentinelAddrs: o.SentinelAddrs, SentinelPassword: o.SentinelPassword,
			Username: o.Username, Password: o.Password, DB: o.DB, DialTimeout: dial,
		}), nil
	default:
		return redis.NewClient(&redis.Options{
			Addr: o.Addr, Username: o.Username, Password: o.Password, DB: o.DB, DialTimeout: dial,
		}), nil
	}
}

// Open returns a client for o once Redis answers PING. The caller closes it.
func (o Options) Open(ctx context.Context) (redis.UniversalClient, error) {
	rdb, err := o.Client()
	if err != nil {
		return nil, err
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("connect to redis %s: %w", o, err)
	}
	return rdb, nil
}
