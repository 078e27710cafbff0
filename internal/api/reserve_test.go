package api_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/syncer"
)

// TestBucketReserve: the reserve goes in and out of the API, is refused
// at or above max_permits (also when max_permits is lowered under it),
// reaches Redis through the sync worker, keeps its tokens for critical
// requests of the client, and the state tells how much of it is left.
func TestBucketReserve(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	owner := e.user("olivia")
	e.app("alpha", "olivia")
	b := e.must(422, owner, "POST", "/api/v1/buckets", map[string]any{"name": "pay", "owner_app": "alpha",
		"max_permits": 4, "rate": "1/h", "reserve": 4}).errorBody(t)
	if b.reasonFor("reserve") == "" {
		t.Fatalf("reserve of the whole capacity: %+v", b.Error)
	}
	var got bucketJSON
	e.must(201, owner, "POST", "/api/v1/buckets", map[string]any{"name": "pay", "owner_app": "alpha",
		"max_permits": 4, "rate": "1/h", "reserve": 2}).decode(t, &got)
	if got.Reserve != 2 {
		t.Fatalf("created: %+v", got)
	}
	var raw map[string]any
	e.must(200, owner, "GET", "/api/v1/buckets/pay", nil).decode(t, &raw)
	if raw["reserve"] != float64(2) {
		t.Fatalf("GET body: %v", raw)
	}
	b = e.must(422, owner, "PATCH", "/api/v1/buckets/pay", map[string]any{"max_permits": 2}, "If-Match", "*").errorBody(t)
	if b.reasonFor("reserve") == "" {
		t.Fatalf("max_permits lowered to the reserve: %+v", b.Error)
	}

	worker := syncer.New(syncer.Config{Buckets: e.buckets, Redis: e.rdb, Keyspace: e.ks})
	if _, err := worker.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	lim, err := client.New(e.rdb, "alpha", client.WithKeyPrefix(e.ks.Prefix), client.WithFailurePolicy(client.FailClosed),
		client.WithTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	for i, want := range []bool{true, true, false} {
		if res, err := lim.Acquire(ctx, "pay", 1); err != nil || res.Allowed != want {
			t.Fatalf("acquire %d, not critical: %+v %v, want allowed %v", i+1, res, err, want)
		}
	}
	var st struct {
		Reserve     int64  `json:"reserve"`
		ReserveLeft *int64 `json:"reserve_left"`
	}
	e.must(200, owner, "GET", "/api/v1/buckets/pay/state", nil).decode(t, &st)
	if st.Reserve != 2 || st.ReserveLeft == nil || *st.ReserveLeft != 2 {
		t.Fatalf("state with the reserve whole: %+v", st)
	}
	if res, err := lim.Acquire(client.Critical(ctx), "pay", 1); err != nil || !res.Allowed {
		t.Fatalf("critical acquire: %+v %v", res, err)
	}
	e.must(200, owner, "GET", "/api/v1/buckets/pay/state", nil).decode(t, &st)
	if st.ReserveLeft == nil || *st.ReserveLeft != 1 {
		t.Fatalf("state after a critical acquire: %+v", st)
	}
	e.must(200, owner, "PATCH", "/api/v1/buckets/pay", map[string]any{"reserve": 0}, "If-Match", `"1"`).decode(t, &got)
	if got.Reserve != 0 || got.Version != 2 {
		t.Fatalf("after PATCH: %+v", got)
	}
}
