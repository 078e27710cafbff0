package client_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/redisscript/testenv"
)

// TestClusterAcquireAll: on Redis Cluster, a set of buckets in one slot is
// taken atomically; a set across slots gets ErrCrossSlot and charges
// nothing, whether the client or Redis refuses it.
func TestClusterAcquireAll(t *testing.T) {
	cluster := testenv.StartCluster(t, 3)
	rdb := cluster.Client(t)
	ctx := context.Background()
	ks := redisscript.Keyspace{}

	// Two names in one slot, and one in another slot on another master.
	slotOf := map[int64]string{}
	var same [2]string
	for i := 0; same[0] == ""; i++ {
		if i > 5000 {
			t.Fatal("no two of 5000 names share a slot")
		}
		name := "g-" + strconv.Itoa(i)
		slot, err := rdb.ClusterKeySlot(ctx, ks.Bucket(name)).Result()
		if err != nil {
			t.Fatal(err)
		}
		if prev, ok := slotOf[slot]; ok {
			same = [2]string{prev, name}
		}
		slotOf[slot] = name
	}
	far := ""
	for i := 0; far == ""; i++ {
		name := "far-" + strconv.Itoa(i)
		if cluster.NodeFor(t, ks.Bucket(name)) != cluster.NodeFor(t, ks.Bucket(same[0])) {
			far = name
		}
	}
	for i, name := range []string{same[0], same[1], far} {
		cfg := redisscript.Config{Name: name, ID: int64(i + 1), Version: 1, Capacity: 10, PermitsMicro: 1,
			PeriodSeconds: 3600, Apps: []string{"svc"}}
		if _, err := redisscript.Apply(ctx, rdb, ks, cfg, false); err != nil {
			t.Fatalf("apply %s: %v", name, err)
		}
	}
	l, err := client.New(rdb, "svc", client.WithFailurePolicy(client.FailClosed), client.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	res, err := l.AcquireAll(ctx, []client.Request{{Bucket: same[0], N: 3}, {Bucket: same[1], N: 4}})
	if err != nil || !res.Allowed {
		t.Fatalf("one slot: %+v %v", res, err)
	}
	read := func(name string) float64 {
		st, err := redisscript.Read(ctx, rdb, ks, name)
		if err != nil {
			t.Fatal(err)
		}
		return st.Stored
	}
	before := map[string]float64{}
	for _, name := range []string{same[0], same[1], far} {
		before[name] = read(name)
	}
	if before[same[0]] != 7 || before[same[1]] != 6 || before[far] != 10 {
		t.Fatalf("after the one-slot set: %v", before)
	}
	// Across slots: a clear error from the client, nothing charged.
	_, err = l.AcquireAll(ctx, []client.Request{{Bucket: same[0], N: 1}, {Bucket: far, N: 1}})
	if !errors.Is(err, client.ErrCrossSlot) {
		t.Fatalf("cross slot: %v", err)
	}
	// Redis itself refuses a cross-slot script before running it.
	_, err = redisscript.AcquireAll(ctx, rdb, ks, "svc",
		[]redisscript.Entry{{Bucket: same[0], N: 1}, {Bucket: far, N: 1}})
	if err == nil || !contains(err.Error(), "CROSSSLOT") {
		t.Fatalf("cross-slot script sent to redis: %v", err)
	}
	for _, name := range []string{same[0], same[1], far} {
		if got := read(name); got != before[name] {
			t.Errorf("%s: %v -> %v: a cross-slot set charged it", name, before[name], got)
		}
	}
	// Refund and Charge are single-bucket calls: fine anywhere.
	if a, err := l.Refund(ctx, far, 1); err != nil || a.Remaining != 10 {
		t.Errorf("refund on the cluster: %+v %v", a, err)
	}
}
