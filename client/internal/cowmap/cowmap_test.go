package cowmap

import (
	"strconv"
	"sync"
	"testing"
)

func TestLoadOrAdd(t *testing.T) {
	var m Map[int]
	if _, ok := m.Load("a"); ok || m.All() != nil {
		t.Fatal("zero Map is not empty")
	}
	calls := 0
	add := func(v int, keep bool) func(int) (int, bool) {
		return func(int) (int, bool) { calls++; return v, keep }
	}
	if v := m.LoadOrAdd("a", add(1, true)); v != 1 {
		t.Fatalf("added %d", v)
	}
	if v := m.LoadOrAdd("a", add(2, true)); v != 1 || calls != 1 {
		t.Fatalf("second add of a: %d, %d calls", v, calls)
	}
	if v := m.LoadOrAdd("b", add(3, false)); v != 3 {
		t.Fatalf("unkept value %d", v)
	}
	if _, ok := m.Load("b"); ok {
		t.Fatal("a value add did not keep is stored")
	}
	before := m.All()
	m.LoadOrAdd("c", add(4, true))
	if len(before) != 1 || len(m.All()) != 2 {
		t.Fatalf("an addition changed a map already handed out: %v, now %v", before, m.All())
	}
}

// TestLoadOrAddConcurrent: every name is added once, whoever asks first.
func TestLoadOrAddConcurrent(t *testing.T) {
	var m Map[*int]
	var wg sync.WaitGroup
	got := make([][]*int, 8)
	for g := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				got[g] = append(got[g], m.LoadOrAdd(strconv.Itoa(i), func(int) (*int, bool) { return new(int), true }))
			}
		}()
	}
	wg.Wait()
	for g := range got {
		for i := range got[g] {
			if got[g][i] != got[0][i] {
				t.Fatalf("name %d: goroutines %d and 0 got different values", i, g)
			}
		}
	}
	if n := len(m.All()); n != 100 {
		t.Fatalf("%d names, want 100", n)
	}
}
