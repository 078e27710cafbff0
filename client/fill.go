package client

// Used returns the fraction of the bucket's capacity in use after this
// call: 0 when the bucket is full of tokens, 1 when none is left (also
// while it is in debt). It is 0 when the capacity is unknown (Limit 0:
// fail open). A value near 1 means callers are close to being denied.
func (r Result) Used() float64 {
	if r.Limit <= 0 {
		return 0
	}
	return 1 - float64(min(max(r.Remaining, 0), r.Limit))/float64(r.Limit)
}
