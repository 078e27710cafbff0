package main

import (
	"math/bits"
	"time"
)

// subBuckets is the number of buckets per power of two: a resolution of
// 1/256 (0.4%), fine enough to tell two p50s apart by less than a percent.
const (
	subBits    = 8
	subBuckets = 1 << subBits
)

// histogram records latencies in log-linear buckets so that recording
// never allocates and does not disturb the allocation count of the call
// being measured.
type histogram struct {
	counts [subBuckets * (64 - subBits)]uint64
	total  uint64
}

func bucketOf(ns int64) int {
	if ns < subBuckets {
		if ns < 0 {
			return 0
		}
		return int(ns)
	}
	exp := bits.Len64(uint64(ns)) - (subBits + 1)
	mant := ns >> exp // in [subBuckets, 2*subBuckets)
	return subBuckets*(exp+1) + int(mant-subBuckets)
}

// lowerBound is the smallest latency that falls in bucket i.
func lowerBound(i int) int64 {
	if i < subBuckets {
		return int64(i)
	}
	exp := i/subBuckets - 1
	mant := int64(i%subBuckets + subBuckets)
	return mant << exp
}

func (h *histogram) record(d time.Duration) {
	h.counts[bucketOf(int64(d))]++
	h.total++
}

func (h *histogram) merge(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.total += o.total
}

// quantile returns the latency below which a fraction q of the calls fell,
// as the middle of its bucket.
func (h *histogram) quantile(q float64) time.Duration {
	if h.total == 0 {
		return 0
	}
	rank := uint64(q * float64(h.total))
	if rank >= h.total {
		rank = h.total - 1
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen > rank {
			lo := lowerBound(i)
			hi := lowerBound(i + 1)
			return time.Duration((lo + hi) / 2)
		}
	}
	return 0
}
