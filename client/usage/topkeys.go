package usage

import (
	"cmp"
	"slices"
)

// summary is a Space-Saving summary (Metwally, Agrawal, El Abbadi, 2005)
// of the keys of one keyed bucket: at most k counters, whatever the number
// of distinct keys. A key already counted adds to its counter; a new key
// takes a free counter, or else the smallest one, whose count it inherits
// (and records as its error). So, for a stream of n counts:
//
//   - every key counted more than n/k times holds a counter;
//   - a counter's count is at least its key's true count and at most that
//     plus its error, and every error is at most n/k.
//
// The counters are a min-heap on count, so an add costs O(log k).
type summary struct {
	k    int
	n    int64 // counts added
	pos  map[string]int
	heap []counter
}

// counter is one key's estimate: count >= true count >= count - err.
type counter struct {
	key        string
	count, err int64
}

func newSummary(k int) *summary {
	return &summary{k: k, pos: make(map[string]int, k)}
}

// add counts key c times.
func (s *summary) add(key string, c int64) {
	s.n += c
	if i, ok := s.pos[key]; ok {
		s.heap[i].count += c
		s.down(i)
		return
	}
	if len(s.heap) < s.k {
		s.heap = append(s.heap, counter{key: key, count: c})
		s.pos[key] = len(s.heap) - 1
		s.up(len(s.heap) - 1)
		return
	}
	// Replace the smallest counter: the new key inherits its count as error.
	m := s.heap[0]
	delete(s.pos, m.key)
	s.heap[0] = counter{key: key, count: m.count + c, err: m.count}
	s.pos[key] = 0
	s.down(0)
}

// top returns the counters, highest count first, ties by key.
func (s *summary) top() []counter {
	out := slices.Clone(s.heap)
	slices.SortFunc(out, func(a, b counter) int {
		if c := cmp.Compare(b.count, a.count); c != 0 {
			return c
		}
		return cmp.Compare(a.key, b.key)
	})
	return out
}

func (s *summary) less(i, j int) bool { return s.heap[i].count < s.heap[j].count }

func (s *summary) swap(i, j int) {
	s.heap[i], s.heap[j] = s.heap[j], s.heap[i]
	s.pos[s.heap[i].key] = i
	s.pos[s.heap[j].key] = j
}

func (s *summary) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !s.less(i, p) {
			return
		}
		s.swap(i, p)
		i = p
	}
}

func (s *summary) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(s.heap) {
			return
		}
		m := l
		if r := l + 1; r < len(s.heap) && s.less(r, l) {
			m = r
		}
		if !s.less(m, i) {
			return
		}
		s.swap(i, m)
		i = m
	}
}
