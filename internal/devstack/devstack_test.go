package devstack_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/devstack"
	"github.com/sluicehq/sluice/internal/redisscript"
)

// The stack needs no servers: both stores run in process.
func TestStackServesTheDemoBucket(t *testing.T) {
	ctx := context.Background()
	st, err := devstack.Start(ctx, devstack.Options{AdminPassword: "correct horse battery"})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	if st.RedisAddr == "" || st.DSN == "" {
		t.Fatalf("stack addresses missing: redis %q, dsn %q", st.RedisAddr, st.DSN)
	}

	state, err := redisscript.Read(ctx, st.Redis, st.Keyspace, devstack.DemoBucket)
	if err != nil {
		t.Fatalf("read demo bucket: %v", err)
	}
	if !state.Exists || state.Config.Capacity != 10 {
		t.Fatalf("demo bucket in redis = %+v, want capacity 10", state)
	}

	l, err := client.New(st.Redis, devstack.DemoApp, client.WithTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	granted := 0
	start := time.Now()
	for range 30 {
		res, err := l.Acquire(ctx, devstack.DemoBucket, 1)
		if err != nil {
			t.Fatalf("Acquire: %v", err)
		}
		if !res.Allowed {
			if res.RetryAfter <= 0 {
				t.Fatalf("denied without a retry-after: %+v", res)
			}
			break
		}
		granted++
	}
	// 10 tokens to start with, plus what 5/s refilled while the loop ran.
	if most := 10 + int(5*time.Since(start).Seconds()); granted < 10 || granted > most {
		t.Fatalf("granted %d of 30 quick acquires, want the capacity of 10 and at most %d", granted, most)
	}
}

// The embedded decision service answers with the seeded token, and says
// 429 once the demo bucket is empty.
func TestStackDecides(t *testing.T) {
	ctx := context.Background()
	// A long timeout: on a loaded machine a stalled call would otherwise
	// be answered by the failure policy, which denies.
	st, err := devstack.Start(ctx, devstack.Options{AdminPassword: "correct horse battery",
		DecideClient: []client.Option{client.WithTimeout(10 * time.Second)}})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	if st.Decide.GRPCAddr == "" || st.Decide.HTTPAddr == "" || !strings.HasPrefix(st.Decide.Token, "sla_") {
		t.Fatalf("decision service not started: %+v", st.Decide)
	}
	start := time.Now()
	granted := 0
	for range 40 {
		req, _ := http.NewRequest("POST", "http://"+st.Decide.HTTPAddr+"/v1/acquire",
			strings.NewReader(`{"bucket": "`+devstack.DemoBucket+`"}`))
		req.Header.Set("Authorization", "Bearer "+st.Decide.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			if resp.Header.Get("Retry-After") == "" {
				t.Fatal("429 without Retry-After")
			}
			break
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("acquire: %d", resp.StatusCode)
		}
		granted++
	}
	if most := 10 + int(5*time.Since(start).Seconds()); granted < 10 || granted > most {
		t.Fatalf("granted %d, want the capacity of 10 and at most %d", granted, most)
	}
}
