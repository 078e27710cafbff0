package decision

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/sluicehq/sluice/client"
)

// Headers selects the rate limit headers the service sends back: to Envoy
// as response_headers_to_add, and on the HTTP API's responses.
type Headers int

// Header sets. The zero value is HeadersDraft.
const (
	// HeadersDraft: RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset
	// (the IETF draft's names, as the Go client's middleware sends).
	HeadersDraft Headers = iota
	// HeadersX: X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset.
	HeadersX
	// HeadersBoth sends both sets.
	HeadersBoth
	// HeadersNone sends none; Envoy can still make its own X-RateLimit
	// headers from the descriptor statuses (enable_x_ratelimit_headers).
	HeadersNone
)

// ParseHeaders reads "draft", "x", "both" or "none".
func ParseHeaders(s string) (Headers, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "draft", "":
		return HeadersDraft, nil
	case "x":
		return HeadersX, nil
	case "both":
		return HeadersBoth, nil
	case "none":
		return HeadersNone, nil
	}
	return 0, fmt.Errorf("rate limit headers: want draft, x, both or none, not %q", s)
}

func (h Headers) String() string {
	return [...]string{"draft", "x", "both", "none"}[h]
}

// Write sets the headers of r on dst.
func (h Headers) Write(dst http.Header, r client.Result) {
	pairs, n := h.pairs(r)
	// One allocation for the values; the names are stored canonical
	// already, which Set would work out (and allocate) for each.
	vals := make([]string, n)
	for i, p := range pairs[:n] {
		vals[i] = p[1]
		dst[canonicalName[p[0]]] = vals[i : i+1 : i+1]
	}
}

// pairs are the headers of r, spelled as the drafts do: the chosen set,
// and Retry-After on a denial (always, even with HeadersNone: it is what
// makes a 429 useful). The values are those of the Go client's middleware.
// The first n pairs are set.
func (h Headers) pairs(r client.Result) (out [7][2]string, n int) {
	if h == HeadersNone {
		r.Limit = 0 // HeaderValues then formats none of the three
	}
	limit, remaining, reset, retryAfter := client.HeaderValues(r)
	if limit != "" {
		for i, v := range [3]string{limit, remaining, reset} {
			if h == HeadersDraft || h == HeadersBoth {
				out[n] = [2]string{headerNames[i][0], v}
				n++
			}
			if h == HeadersX || h == HeadersBoth {
				out[n] = [2]string{headerNames[i][1], v}
				n++
			}
		}
	}
	if retryAfter != "" {
		out[n] = [2]string{"Retry-After", retryAfter}
		n++
	}
	return out, n
}

// headerNames are the names of the limit, remaining and reset headers, as
// the draft and with X-.
var headerNames = [3][2]string{
	{"RateLimit-Limit", "X-RateLimit-Limit"},
	{"RateLimit-Remaining", "X-RateLimit-Remaining"},
	{"RateLimit-Reset", "X-RateLimit-Reset"},
}

// canonicalName is every name pairs spells, as http.Header keys it.
var canonicalName = func() map[string]string {
	m := map[string]string{"Retry-After": "Retry-After"}
	for _, names := range headerNames {
		for _, n := range names {
			m[n] = http.CanonicalHeaderKey(n)
		}
	}
	return m
}()

// deciding returns the status whose numbers a response's headers show:
// of a denied request, the denial that lasts longest; of an allowed one,
// the bucket with the fewest tokens left. ok is false when no bucket was
// asked (every descriptor unmatched).
func deciding(statuses []Status, overall Code) (Status, bool) {
	var best Status
	found := false
	for _, st := range statuses {
		if st.Result.Limit <= 0 || (overall == CodeOverLimit && st.Code != CodeOverLimit) {
			continue
		}
		switch {
		case !found:
		case overall == CodeOverLimit && st.Result.RetryAfter > best.Result.RetryAfter:
		case overall != CodeOverLimit && st.Result.Remaining < best.Result.Remaining:
		default:
			continue
		}
		best, found = st, true
	}
	return best, found
}
