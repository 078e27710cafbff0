package main

import (
	"runtime"
	"testing"
	"time"
)

func roundsResult(ops ...float64) *result {
	r := &result{rounds: ops}
	for _, o := range ops {
		r.calls += int64(o)
		r.elapsed += time.Second
	}
	return r
}

// Below the smaller pool size the two pool settings are one configuration:
// best averages them round by round instead of picking the luckier run.
func TestBestAveragesPoolsThatCannotDiffer(t *testing.T) {
	results := map[string]map[int]*result{
		"redis_rate":          {5: roundsResult(100, 110, 90)},
		"redis_rate pool=100": {5: roundsResult(120, 90, 100)},
		"redis_rateX":         {5: roundsResult(1000, 1000, 1000)},
	}
	name, r := best(results, "redis_rate", 5)
	if name != "redis_rate, any pool" {
		t.Fatalf("at 5 goroutines best is %q, want the pools averaged", name)
	}
	want := []float64{110, 100, 95}
	for i, w := range want {
		if r.rounds[i] != w {
			t.Fatalf("round %d: %v, want %v (rounds %v)", i, r.rounds[i], w, r.rounds)
		}
	}
	if got := r.opsPerSec(); got != 610.0/6 {
		t.Fatalf("averaged throughput %v, want %v", got, 610.0/6)
	}
	// Above the default pool size the settings differ and the best wins.
	g := 10*runtime.GOMAXPROCS(0) + 1
	results["redis_rate"][g] = roundsResult(100, 100, 100)
	results["redis_rate pool=100"][g] = roundsResult(150, 150, 150)
	if name, _ := best(results, "redis_rate", g); name != "redis_rate pool=100" {
		t.Fatalf("at %d goroutines best is %q, want the larger pool", g, name)
	}
}
