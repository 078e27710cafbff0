// Package redisconn turns configuration (flags and SLUICE_REDIS_*
// environment variables) into a go-redis client for one Redis server, a
// Sentinel-managed primary or a Redis Cluster, so that every Sluice binary
// reaches Redis the same way.
package redisconn

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Environment variables read by FromEnv.
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

// FromEnv reads the SLUICE_REDIS_* variables through getenv (os.Getenv in
// production). It does not validate the combination: call Validate after
// flags had their say.
func FromEnv(getenv func(string) string) (Options, error) {
	o := Options{
		Addr:             strings.TrimSpace(getenv(EnvAddr)),
		SentinelMaster:   strings.TrimSpace(getenv(EnvSentinelMaster)),
		SentinelAddrs:    splitList(getenv(EnvSentinelAddrs)),
		ClusterAddrs:     splitList(getenv(EnvCluster)),
		Username:         getenv(EnvUsername),
		Password:         getenv(EnvPassword),
		SentinelPassword: getenv(EnvSentinelPassword),
	}
	if s := strings.TrimSpace(getenv(EnvDB)); s != "" {
		db, err := strconv.Atoi(s)
		if err != nil {
			return o, fmt.Errorf("%s=%q: not a whole number", EnvDB, s)
		}
		o.DB = db
	}
	return o, nil
}

// RegisterFlags defines -redis-addr, -redis-sentinel-master,
// -redis-sentinel-addrs, -redis-cluster and -redis-db on fs, with o's
// current values (from FromEnv) as defaults, so a flag overrides the
// environment.
func (o *Options) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Addr, "redis-addr", o.Addr, "Redis `host:port` of a single server (env "+EnvAddr+")")
	fs.StringVar(&o.SentinelMaster, "redis-sentinel-master", o.SentinelMaster,
		"master `name` monitored by Redis Sentinel (env "+EnvSentinelMaster+")")
	fs.Var((*list)(&o.SentinelAddrs), "redis-sentinel-addrs",
		"comma-separated sentinel `addresses` (env "+EnvSentinelAddrs+")")
	fs.Var((*list)(&o.ClusterAddrs), "redis-cluster",
		"comma-separated Redis Cluster seed `addresses` (env "+EnvCluster+")")
	fs.IntVar(&o.DB, "redis-db", o.DB, "Redis logical `database` (env "+EnvDB+"; not for a cluster)")
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

// list is a comma-separated flag value.
type list []string

func (l *list) String() string {
	if l == nil {
		return ""
	}
	return strings.Join(*l, ",")
}

func (l *list) Set(s string) error {
	*l = splitList(s)
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
