package redisconn

import (
	"context"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/settings"
	"github.com/sluicehq/sluice/internal/testenv"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// fromEnv binds o to a fresh set and parses env and args.
func fromEnv(m map[string]string, args ...string) (*Options, error) {
	o := &Options{}
	s := settings.New("x", "x", env(m), io.Discard)
	o.Bind(s)
	return o, s.Parse(args)
}

func TestBindEnvAndFlags(t *testing.T) {
	o, err := fromEnv(map[string]string{EnvCluster: " 10.0.0.1:7000, 10.0.0.2:7000 ,,", EnvPassword: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	if got := o.ClusterAddrs; !slices.Equal(got, []string{"10.0.0.1:7000", "10.0.0.2:7000"}) {
		t.Fatalf("cluster addrs = %q", got)
	}
	if o.Mode() != "cluster" || o.Validate() != nil || o.Password != "s3cret" {
		t.Fatalf("mode %q, validate %v", o.Mode(), o.Validate())
	}
	if strings.Contains(o.String(), "s3cret") {
		t.Fatalf("String() leaks the password: %s", o)
	}
	// A flag overrides the environment; choosing a second mode is refused.
	o, err = fromEnv(map[string]string{EnvCluster: "10.0.0.1:7000"}, "-redis-addr", "127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "more than one way") {
		t.Fatalf("two modes: err = %v", err)
	}
	o, err = fromEnv(map[string]string{EnvCluster: "10.0.0.1:7000"}, "-redis-addr", "127.0.0.1:1", "-redis-cluster", "")
	if err != nil {
		t.Fatal(err)
	}
	if o.Mode() != "single" || o.Validate() != nil || o.Addr != "127.0.0.1:1" {
		t.Fatalf("after clearing the cluster: mode %q, addr %q, validate %v", o.Mode(), o.Addr, o.Validate())
	}
	// Credentials have no flags: they would show in ps.
	if _, err := fromEnv(nil, "-redis-password", "x"); err == nil {
		t.Fatal("a password flag was accepted")
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string // substring of the error; "" means valid
	}{
		{"nothing", nil, "not configured"},
		{"single", map[string]string{EnvAddr: "localhost:6379"}, ""},
		{"no port", map[string]string{EnvAddr: "localhost"}, "host:port"},
		{"sentinel", map[string]string{EnvSentinelMaster: "m", EnvSentinelAddrs: "a:1,b:2"}, ""},
		{"sentinel without addrs", map[string]string{EnvSentinelMaster: "m"}, EnvSentinelAddrs},
		{"sentinel without master", map[string]string{EnvSentinelAddrs: "a:1"}, EnvSentinelMaster},
		{"cluster with db", map[string]string{EnvCluster: "a:1", EnvDB: "2"}, "database 0"},
		{"negative db", map[string]string{EnvAddr: "a:1", EnvDB: "-1"}, "negative"},
		{"db not a number", map[string]string{EnvAddr: "a:1", EnvDB: "one"}, EnvDB},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := fromEnv(tc.env)
			if err == nil {
				err = o.Validate()
			}
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

func TestOpenSingle(t *testing.T) {
	addr := testenv.RedisAddr(t)
	ctx := context.Background()
	rdb, err := Options{Addr: addr}.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	if _, ok := rdb.(*redis.Client); !ok {
		t.Fatalf("single mode gave %T", rdb)
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
}

func TestOpenUnreachable(t *testing.T) {
	o := Options{Addr: testenv.ClosedAddr}
	_, err := o.Open(context.Background())
	if err == nil || !strings.Contains(err.Error(), o.Addr) {
		t.Fatalf("err = %v, want one naming %s", err, o.Addr)
	}
}

func TestOpenSentinelAndCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts private sentinel and cluster servers")
	}
	ctx := context.Background()
	s := testenv.StartSentinel(t)
	rdb, err := Options{SentinelMaster: testenv.SentinelMaster, SentinelAddrs: s.Addrs}.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, "redisconn-test", "1", 0).Err(); err != nil {
		t.Fatalf("write through sentinel: %v", err)
	}
	rdb.Close()

	c := testenv.StartCluster(t, 3)
	crdb, err := Options{ClusterAddrs: c.Addrs[:1]}.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer crdb.Close()
	if _, ok := crdb.(*redis.ClusterClient); !ok {
		t.Fatalf("cluster mode gave %T", crdb)
	}
	// Keys in different slots reach different masters through one seed.
	for _, k := range []string{"a", "b", "c", "d"} {
		if err := crdb.Set(ctx, k, k, 0).Err(); err != nil {
			t.Fatalf("cluster write %q: %v", k, err)
		}
	}
}
