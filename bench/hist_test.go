package main

import (
	"testing"
	"time"
)

func TestBucketsAreOrderedAndTight(t *testing.T) {
	prev := -1
	for ns := int64(0); ns < 1<<40; ns = ns*17/16 + 1 {
		b := bucketOf(ns)
		if b < prev {
			t.Fatalf("bucketOf(%d) = %d, below bucket %d of a smaller value", ns, b, prev)
		}
		prev = b
		lo, hi := lowerBound(b), lowerBound(b+1)
		if ns < lo || ns >= hi {
			t.Fatalf("%d falls in bucket %d = [%d, %d)", ns, b, lo, hi)
		}
		if ns >= subBuckets && float64(hi-lo)/float64(lo) > 1.0/subBuckets+1e-9 {
			t.Fatalf("bucket %d = [%d, %d) is wider than 1/%d", b, lo, hi, subBuckets)
		}
	}
}

func TestQuantile(t *testing.T) {
	var h histogram
	for i := 1; i <= 1000; i++ {
		h.record(time.Duration(i) * time.Microsecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Microsecond}, {0.99, 990 * time.Microsecond}, {0, time.Microsecond}, {1, 1000 * time.Microsecond}} {
		got := h.quantile(c.q)
		if diff := float64(got-c.want) / float64(c.want); diff < -0.02 || diff > 0.02 {
			t.Errorf("quantile(%v) = %v, want %v within 2%%", c.q, got, c.want)
		}
	}
}
