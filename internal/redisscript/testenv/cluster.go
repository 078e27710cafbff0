package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a private Redis Cluster of masters without replicas on
// loopback, created with `redis-cli --cluster create` and stopped when the
// test ends.
type Cluster struct {
	// Nodes are the masters, in the order they were created.
	Nodes []*RedisServer
	// Addrs are the nodes' client addresses ("127.0.0.1:port").
	Addrs []string
}

// StartCluster starts masters redis-server processes in cluster mode,
// joins them into one cluster that covers every slot, and waits until
// every node reports cluster_state:ok. Redis Cluster needs at least three
// masters.
func StartCluster(t testing.TB, masters int) *Cluster {
	t.Helper()
	if masters < 3 {
		t.Fatalf("StartCluster: redis-cli --cluster create needs at least 3 masters, got %d", masters)
	}
	cli := LookPath(t, "redis-cli")
	c := &Cluster{}
	for range masters {
		// The bus port is chosen explicitly: the default port+10000 may be
		// taken or out of range for an ephemeral client port.
		s := StartRedis(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "3000", "--cluster-port", strconv.Itoa(FreePort(t)))
		c.Nodes = append(c.Nodes, s)
		c.Addrs = append(c.Addrs, s.Addr)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	if !WaitFor(30*time.Second, c.healthy) {
		t.Fatalf("redis cluster %v did not reach cluster_state:ok", c.Addrs)
	}
	return c
}

// healthy reports whether every node sees the whole cluster with all slots served.
func (c *Cluster) healthy() bool {
	for _, addr := range c.Addrs {
		info, err := infoOf(addr, "CLUSTER", "INFO")
		if err != nil {
			return false
		}
		if info["cluster_state"] != "ok" || info["cluster_slots_ok"] != "16384" ||
			info["cluster_known_nodes"] != strconv.Itoa(len(c.Addrs)) {
			return false
		}
	}
	return true
}

// Options returns cluster client options that reach every node of c.
func (c *Cluster) Options() *redis.ClusterOptions {
	return &redis.ClusterOptions{Addrs: append([]string(nil), c.Addrs...)}
}

// Client returns a cluster client of c, closed when t ends.
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	t.Helper()
	rdb := redis.NewClusterClient(c.Options())
	t.Cleanup(func() { rdb.Close() })
	if err := rdb.ForEachShard(context.Background(), func(ctx context.Context, shard *redis.Client) error {
		return shard.Ping(ctx).Err()
	}); err != nil {
		t.Fatalf("ping redis cluster: %v", err)
	}
	return rdb
}

// NodeFor returns the master that serves key, asking the cluster itself.
func (c *Cluster) NodeFor(t testing.TB, key string) *RedisServer {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: c.Addrs[0]})
	defer rdb.Close()
	ctx := context.Background()
	slot, err := rdb.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		t.Fatalf("cluster keyslot %q: %v", key, err)
	}
	shards, err := rdb.ClusterShards(ctx).Result()
	if err != nil {
		t.Fatalf("cluster shards: %v", err)
	}
	for _, sh := range shards {
		for _, r := range sh.Slots {
			if slot < r.Start || slot > r.End {
				continue
			}
			for _, node := range sh.Nodes {
				if node.Role != "master" {
					continue
				}
				for _, n := range c.Nodes {
					if int64(n.Port) == node.Port {
						return n
					}
				}
			}
		}
	}
	t.Fatalf("no node of %v serves slot %d", c.Addrs, slot)
	return nil
}

// SentinelMaster is the master name the sentinels of StartSentinel monitor.
const SentinelMaster = "sluice"

// Sentinel is a private primary, one replica and three redis-sentinel
// processes monitoring them under the name SentinelMaster, all on loopback
// and stopped when the test ends. Its methods are not safe for concurrent use.
type Sentinel struct {
	t testing.TB
	// Primary and Replica are the servers in their current roles: Failover
	// and KillPrimary swap them.
	Primary, Replica *RedisServer
	// Sentinels are the redis-sentinel processes.
	Sentinels []*Process
	// Addrs are the sentinels' addresses.
	Addrs []string
}

// StartSentinel starts a primary, a replica of it and three sentinels with
// a quorum of two, a down-after of 1 s and a short failover timeout, and
// waits until the replica is in sync and every sentinel knows it.
func StartSentinel(t testing.TB) *Sentinel {
	t.Helper()
	path := LookPath(t, "redis-sentinel")
	primary := StartRedis(t)
	replica := StartRedis(t, "--replicaof", "127.0.0.1", strconv.Itoa(primary.Port))
	s := &Sentinel{t: t, Primary: primary, Replica: replica}
	for range 3 {
		port := FreePort(t)
		dir := t.TempDir()
		// Sentinel rewrites its configuration file, so it lives in the temp dir.
		conf := filepath.Join(dir, "sentinel.conf")
		text := fmt.Sprintf(`port %d
bind 127.0.0.1
protected-mode no
dir %s
sentinel monitor %s 127.0.0.1 %d 2
sentinel down-after-milliseconds %[3]s 1000
sentinel failover-timeout %[3]s 5000
sentinel parallel-syncs %[3]s 1
`, port, dir, SentinelMaster, primary.Port)
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			t.Fatalf("write sentinel config: %v", err)
		}
		p := NewProcess(t, "sentinel-"+strconv.Itoa(port), path, dir, []string{conf})
		p.Start()
		s.Sentinels = append(s.Sentinels, p)
		s.Addrs = append(s.Addrs, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	}
	ok := WaitFor(30*time.Second, func() bool {
		info, err := infoOf(replica.Addr, "INFO", "replication")
		if err != nil || info["master_link_status"] != "up" {
			return false
		}
		for _, addr := range s.Addrs {
			if !s.sentinelKnowsReplica(addr, replica.Addr) {
				return false
			}
		}
		return true
	})
	if !ok {
		t.Fatalf("sentinels %v did not see replica %s of %s in sync", s.Addrs, replica.Addr, primary.Addr)
	}
	return s
}

// sentinelKnowsReplica reports whether the sentinel at addr lists replica as
// a healthy replica of the master and has found its two peers.
func (s *Sentinel) sentinelKnowsReplica(addr, replica string) bool {
	sc := redis.NewSentinelClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer sc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	replicas, err := sc.Replicas(ctx, SentinelMaster).Result()
	if err != nil {
		return false
	}
	found := false
	for _, r := range replicas {
		if net.JoinHostPort(r["ip"], r["port"]) == replica && !strings.Contains(r["flags"], "down") &&
			r["master-link-status"] == "ok" {
			found = true
		}
	}
	if !found {
		return false
	}
	peers, err := sc.Sentinels(ctx, SentinelMaster).Result()
	return err == nil && len(peers) == len(s.Addrs)-1
}

// FailoverOptions returns options for redis.NewFailoverClient that find the
// current primary through the sentinels.
func (s *Sentinel) FailoverOptions() *redis.FailoverOptions {
	return &redis.FailoverOptions{MasterName: SentinelMaster, SentinelAddrs: append([]string(nil), s.Addrs...)}
}

// Client returns a sentinel-aware client of the current primary, closed when t ends.
func (s *Sentinel) Client(t testing.TB) *redis.Client {
	t.Helper()
	rdb := redis.NewFailoverClient(s.FailoverOptions())
	t.Cleanup(func() { rdb.Close() })
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("ping primary through sentinels: %v", err)
	}
	return rdb
}

// MasterAddr returns the primary address the sentinel at index i reports.
func (s *Sentinel) MasterAddr(ctx context.Context, i int) (string, error) {
	sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addrs[i], MaxRetries: -1})
	defer sc.Close()
	hp, err := sc.GetMasterAddrByName(ctx, SentinelMaster).Result()
	if err != nil {
		return "", fmt.Errorf("sentinel %s: get master addr: %w", s.Addrs[i], err)
	}
	if len(hp) != 2 {
		return "", fmt.Errorf("sentinel %s: get master addr: unexpected answer %q", s.Addrs[i], hp)
	}
	return net.JoinHostPort(hp[0], hp[1]), nil
}

// Failover asks a sentinel to promote the replica (SENTINEL FAILOVER) and
// waits until every sentinel reports it as the primary and it accepts
// writes. It returns the new primary.
func (s *Sentinel) Failover() *RedisServer {
	s.t.Helper()
	sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addrs[0]})
	defer sc.Close()
	if err := sc.Failover(context.Background(), SentinelMaster).Err(); err != nil {
		s.t.Fatalf("sentinel failover: %v", err)
	}
	s.awaitPromotion()
	return s.Primary
}

// KillPrimary kills the primary with SIGKILL and waits until the sentinels
// have detected it and promoted the replica. It returns the new primary;
// the old one stays down (it is s.Replica afterwards, and can be started again).
func (s *Sentinel) KillPrimary() *RedisServer {
	s.t.Helper()
	s.Primary.Kill()
	s.awaitPromotion()
	return s.Primary
}

// awaitPromotion waits until the replica is the primary for every sentinel
// and for itself, then swaps the roles in s.
func (s *Sentinel) awaitPromotion() {
	s.t.Helper()
	want := s.Replica.Addr
	ok := WaitFor(30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		for i := range s.Addrs {
			if addr, err := s.MasterAddr(ctx, i); err != nil || addr != want {
				return false
			}
		}
		info, err := infoOf(want, "INFO", "replication")
		return err == nil && info["role"] == "master"
	})
	if !ok {
		s.t.Fatalf("sentinels did not promote %s", want)
	}
	s.Primary, s.Replica = s.Replica, s.Primary
}

// infoOf runs an INFO-style command on addr and parses its key:value lines.
func infoOf(addr string, args ...any) (map[string]string, error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second,
		ReadTimeout: time.Second, PoolSize: 1})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	text, err := rdb.Do(ctx, args...).Text()
	if err != nil {
		return nil, fmt.Errorf("%v on %s: %w", args, addr, err)
	}
	m := make(map[string]string)
	for line := range strings.SplitSeq(text, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = v
		}
	}
	return m, nil
}
