// Package cowmap is the map the client keeps per-bucket state in: read on
// every call without a lock, added to rarely, by copying under a lock.
package cowmap

import (
	"sync"
	"sync/atomic"
)

// Map maps names to values. Its zero value is empty and ready to use; a
// Map must not be copied after first use. It is safe for concurrent use.
type Map[V any] struct {
	mu sync.Mutex // guards additions
	m  atomic.Pointer[map[string]V]
}

// Load returns the value of name and whether there is one, without a lock.
func (c *Map[V]) Load(name string) (V, bool) {
	var v V
	p := c.m.Load()
	if p == nil {
		return v, false
	}
	v, ok := (*p)[name]
	return v, ok
}

// All returns every name and value, to be read only: the map is never
// changed, only replaced.
func (c *Map[V]) All() map[string]V {
	if p := c.m.Load(); p != nil {
		return *p
	}
	return nil
}

// LoadOrAdd returns the value of name. When there is none it calls add,
// under the lock, with the number of names held, and returns what add
// returns, which it keeps for name if add says so. It always takes the
// lock: callers try Load first, which is inlined and lock-free.
func (c *Map[V]) LoadOrAdd(name string, add func(n int) (v V, keep bool)) V {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.All()
	if v, ok := cur[name]; ok {
		return v
	}
	v, keep := add(len(cur))
	if !keep {
		return v
	}
	next := make(map[string]V, len(cur)+1)
	for k, old := range cur {
		next[k] = old
	}
	next[name] = v
	c.m.Store(&next)
	return v
}
