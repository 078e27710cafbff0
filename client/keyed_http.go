package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// KeyMiddleware limits requests per key: each takes one token, as l's
// app, for the key keyFor returns from keyed bucket bucket. An empty key
// lets the request through unlimited. Responses are those of Middleware:
// RateLimit headers, 429 with Retry-After when denied, 503 when the
// failure policy refuses, 500 when the bucket cannot serve the app.
func KeyMiddleware(l *Limiter, bucket string, keyFor func(*http.Request) string) func(http.Handler) http.Handler {
	return limit(keyFor, func(ctx context.Context, key string) (Result, error) {
		return l.AcquireKey(ctx, bucket, key, 1)
	}, func(err error) {
		l.opt.log.Error("sluice: request not limited as configured", "bucket", bucket, "app", l.app, "err", err)
	})
}

// maxForwardedHops bounds how much of X-Forwarded-For ClientIP reads.
const maxForwardedHops = 32

// ClientIP returns a key function giving the address of the client that
// sent a request: its peer address, or, when the peer is one of the
// trusted proxies, the last address in X-Forwarded-For that is not a
// trusted proxy (read from the right, since a client can put anything on
// the left). With no trusted proxies the header is ignored, so a client
// cannot choose its own key. Addresses come back in canonical form
// (IPv4-mapped IPv6 as IPv4); "" when the peer address is not an IP.
func ClientIP(trusted ...netip.Prefix) func(*http.Request) string {
	isTrusted := func(a netip.Addr) bool {
		for _, p := range trusted {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	return func(r *http.Request) string {
		peer, ok := parseAddr(r.RemoteAddr)
		if !ok {
			return ""
		}
		if !isTrusted(peer) {
			return peer.String()
		}
		client := peer
		hops := 0
		values := r.Header.Values("X-Forwarded-For")
		for i := len(values) - 1; i >= 0; i-- {
			parts := strings.Split(values[i], ",")
			for j := len(parts) - 1; j >= 0; j-- {
				if hops++; hops > maxForwardedHops {
					return client.String()
				}
				a, ok := parseAddr(strings.TrimSpace(parts[j]))
				if !ok {
					return client.String() // garbage: trust nothing further left
				}
				client = a
				if !isTrusted(a) {
					return a.String()
				}
			}
		}
		return client.String()
	}
}

// parseAddr reads "ip" or "ip:port" ("[ipv6]:port").
func parseAddr(s string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), true
	}
	if host, _, err := net.SplitHostPort(s); err == nil {
		s = host
	}
	a, err := netip.ParseAddr(strings.Trim(s, "[]"))
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}

// HeaderKey returns a key function giving the value of header name (an API
// key, a tenant id), trimmed of spaces; "" when absent. A value longer
// than 256 bytes is replaced by "sha256:" and its SHA-256 in hex, so that
// long values still make distinct, valid keys.
func HeaderKey(name string) func(*http.Request) string {
	return func(r *http.Request) string {
		v := strings.TrimSpace(r.Header.Get(name))
		if len(v) > 256 {
			sum := sha256.Sum256([]byte(v))
			return "sha256:" + hex.EncodeToString(sum[:])
		}
		return v
	}
}
