package redisscript

import (
	"strconv"
	"strings"
)

// Usage counts are analytics beside the token contract: how many acquires
// each app had allowed and denied on a bucket, per minute and per hour.
// Each period of a bucket is one hash, hash-tagged on the bucket name like
// the bucket itself (so it lives in the bucket's Cluster slot), with two
// fields per app: UsageAllowedField and UsageDeniedField, and a third,
// UsageWouldDenyField, for the allowed acquires that a bucket in shadow
// mode would have denied. Two more count the calls a client's failure
// policy answered instead of Redis (UsageFallbackAllowedField and
// UsageFallbackRefusedField): no bucket decided them, so they are not in
// the other two. Clients add to them with HINCRBY and set UsageTTLSeconds
// with EXPIRE.

// UsageTTLSeconds is how long a usage hash lives after its last write:
// eight days, so that a week of minutes and hours is always complete.
const UsageTTLSeconds = 8 * 24 * 3600

// UsageMinute returns the key of the usage hash of bucket name for one
// minute, given as Unix seconds / 60: "<prefix>{<name>}:usage:m:<minute>".
func (ks Keyspace) UsageMinute(name string, minute int64) string {
	return ks.usage(name, ":usage:m:", minute)
}

// UsageHour returns the key of the usage hash of bucket name for one hour,
// given as Unix seconds / 3600: "<prefix>{<name>}:usage:h:<hour>".
func (ks Keyspace) UsageHour(name string, hour int64) string {
	return ks.usage(name, ":usage:h:", hour)
}

func (ks Keyspace) usage(name, kind string, n int64) string {
	p := ks.prefix()
	b := make([]byte, 0, len(p)+len(name)+len(kind)+14)
	b = append(b, p...)
	b = append(b, '{')
	b = append(b, name...)
	b = append(b, '}')
	b = append(b, kind...)
	b = strconv.AppendInt(b, n, 10)
	return string(b)
}

// Suffixes of the usage fields of an app.
const (
	usageAllowed   = ":a"
	usageDenied    = ":d"
	usageWouldDeny = ":w"
	usageNearLimit = ":n"
	usageFallbackA = ":f"
	usageFallbackR = ":r"
)

// UsageAllowedField returns the usage hash field counting the allowed
// acquires of app: "<app>:a".
func UsageAllowedField(app string) string { return app + usageAllowed }

// UsageDeniedField returns the usage hash field counting the denied
// acquires of app: "<app>:d".
func UsageDeniedField(app string) string { return app + usageDenied }

// UsageWouldDenyField returns the usage hash field counting the acquires
// of app that a bucket in shadow mode allowed but would have denied:
// "<app>:w". They are counted in UsageAllowedField too, so a reader that
// knows only allowed and denied still adds up every call.
func UsageWouldDenyField(app string) string { return app + usageWouldDeny }

// UsageNearLimitField returns the usage hash field counting the acquires
// of app (allowed, denied or would deny) after which the bucket was near
// its limit: at least NearLimitUsed of its capacity in use. It is a part
// of the other counts, not an outcome of its own.
func UsageNearLimitField(app string) string { return app + usageNearLimit }

// UsageFallbackAllowedField returns the usage hash field counting the
// calls of app that the client's failure policy granted while Redis did
// not answer (or had lost the bucket): "<app>:f". They are not in
// UsageAllowedField, which counts what Redis decided.
func UsageFallbackAllowedField(app string) string { return app + usageFallbackA }

// UsageFallbackRefusedField returns the usage hash field counting the
// calls of app that the client's failure policy refused: "<app>:r". They
// are not in UsageDeniedField: a bucket in shadow mode, which never
// denies, can still have them.
func UsageFallbackRefusedField(app string) string { return app + usageFallbackR }

// NearLimitUsed is the fraction of a bucket's capacity in use from which
// an acquire counts as near the limit: in the usage counts
// (UsageNearLimitField), the console's "near limit" badge and the default
// of the clients' near-limit metric.
const NearLimitUsed = 0.8

// UsageKind is what a usage hash field counts.
type UsageKind int

// Kinds of usage hash fields.
const (
	UsageAllowed UsageKind = iota + 1
	UsageDenied
	UsageWouldDeny
	UsageNearLimit
	UsageFallbackAllowed
	UsageFallbackRefused
)

// ParseUsageCount splits any usage hash field into its app and what it
// counts; ok is false for a field that is none of them or whose app is
// not a valid name.
func ParseUsageCount(field string) (app string, kind UsageKind, ok bool) {
	if len(field) < 3 || field[len(field)-2] != ':' {
		return "", 0, false
	}
	switch field[len(field)-2:] {
	case usageAllowed:
		kind = UsageAllowed
	case usageDenied:
		kind = UsageDenied
	case usageWouldDeny:
		kind = UsageWouldDeny
	case usageNearLimit:
		kind = UsageNearLimit
	case usageFallbackA:
		kind = UsageFallbackAllowed
	case usageFallbackR:
		kind = UsageFallbackRefused
	default:
		return "", 0, false
	}
	app = field[:len(field)-2]
	if !ValidName(app) {
		return "", 0, false
	}
	return app, kind, true
}

// ParseUsageField splits a usage hash field into its app and whether it
// counts allowed (true) or denied (false) acquires. ok is false for any
// other field, including one whose app is not a valid name, and for
// UsageWouldDenyField (a part of the allowed count, not a third outcome).
func ParseUsageField(field string) (app string, allowed, ok bool) {
	if app, found := strings.CutSuffix(field, usageAllowed); found && ValidName(app) {
		return app, true, true
	}
	if app, found := strings.CutSuffix(field, usageDenied); found && ValidName(app) {
		return app, false, true
	}
	return "", false, false
}

// UsageActiveTTLSeconds is how long the set of buckets active in a minute
// lives: two hours, so that a roll-up that was down for up to an hour can
// still catch up on the whole last hour.
const UsageActiveTTLSeconds = 2 * 3600

// UsageActive returns the key of the set of bucket names that had usage
// counted in one minute (Unix seconds / 60): "<prefix>usage:active:<minute>".
// Clients add the buckets of each flush to it (SADD, EXPIRE
// UsageActiveTTLSeconds), so that a roll-up reads the minute hashes of the
// active buckets only, never one per bucket that exists. It is not
// hash-tagged on a bucket (it names many), and lies outside Pattern.
func (ks Keyspace) UsageActive(minute int64) string {
	return ks.prefix() + "usage:active:" + strconv.FormatInt(minute, 10)
}

// Top keys: per keyed bucket and hour, a sorted set of the keys whose
// acquires were denied (DeniedKeys) and one of the keys whose acquires
// were allowed (TakenKeys), scored by their counts. Clients add the
// counters of their bounded summaries with ZINCRBY when they flush (see
// package client/usage) and trim each set to the TopKeysKept highest
// scores, so it stays small whatever the number of keys; it expires
// TopKeysTTLSeconds after its last write, so that a day can be read from
// the sets of its hours. Members are the keys as callers passed them.

// TopKeysKept is how many keys a top-keys set keeps after each write.
const TopKeysKept = 1000

// TopKeysTTLSeconds is how long a top-keys set lives after its last
// write: a day and two hours, so the last 24 hours are always complete.
const TopKeysTTLSeconds = 26 * 3600

// DeniedKeys returns the key of the set of the denied keys of keyed bucket
// name in one hour, given as Unix seconds / 3600:
// "<prefix>{<name>}:hot:h:<hour>".
func (ks Keyspace) DeniedKeys(name string, hour int64) string {
	return ks.usage(name, ":hot:h:", hour)
}

// TakenKeys returns the key of the set of the keys whose acquires keyed
// bucket name allowed in one hour: "<prefix>{<name>}:take:h:<hour>".
func (ks Keyspace) TakenKeys(name string, hour int64) string {
	return ks.usage(name, ":take:h:", hour)
}
