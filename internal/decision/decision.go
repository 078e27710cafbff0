// Package decision is the decision service: it answers "may this caller
// take n tokens?" for gateways and services in any language, over Envoy's
// rate limit service API (gRPC) and a small HTTP API. It is a thin layer
// over the client package: every decision is an Acquire of a client
// Limiter of the calling app, so failure policies, the breaker, usage
// counting and metrics are those of any Go service.
//
// Callers authenticate with an app token (package apptokens). Tokens and
// descriptor mappings are read from MySQL into memory and refreshed when
// the decision revision changes, so a request is authenticated and mapped
// without any I/O, and a wrong credential never reaches Redis. MySQL being
// down does not stop decisions: the last snapshot keeps serving.
package decision

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/apptokens"
	"github.com/sluicehq/sluice/internal/descriptors"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/periodic"
	"github.com/sluicehq/sluice/internal/redisscript"
)

// Unmatched says what a descriptor that no mapping of the caller matches
// answers.
type Unmatched int

// Unmatched behaviours. The zero value is UnmatchedAllow, as Envoy's own
// rate limit service does: a descriptor nobody configured is not limited.
const (
	UnmatchedAllow Unmatched = iota
	UnmatchedDeny
)

// ParseUnmatched reads "allow" or "deny".
func ParseUnmatched(s string) (Unmatched, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "allow", "":
		return UnmatchedAllow, nil
	case "deny":
		return UnmatchedDeny, nil
	}
	return 0, fmt.Errorf("unmatched descriptors: want allow or deny, not %q", s)
}

func (u Unmatched) String() string {
	if u == UnmatchedDeny {
		return "deny"
	}
	return "allow"
}

// Defaults of Config.
const (
	DefaultRefreshInterval = 500 * time.Millisecond
	DefaultLimitsInterval  = 10 * time.Second
	// DefaultCriticalEntry is the descriptor entry that marks a descriptor
	// critical (Config.CriticalEntry).
	DefaultCriticalEntry = "sluice_critical"
)

// Config configures a Service.
type Config struct {
	Sources   Sources
	Acquirers Acquirers
	// Unmatched is the answer for descriptors without a mapping, and for
	// mappings whose bucket does not exist or does not allow the app.
	Unmatched Unmatched
	// Headers selects the rate limit headers sent back (default HeadersDraft).
	Headers Headers
	// CriticalEntry is the key of the descriptor entry that marks a
	// descriptor critical over gRPC (default DefaultCriticalEntry): with
	// the value "true" or "1" its acquire may take the bucket's reserve
	// (client.Critical). The entry is taken out of the descriptor before it
	// is matched, whatever its value, so mappings never list it.
	CriticalEntry string
	// RefreshInterval is how often the decision revision is checked
	// (default DefaultRefreshInterval): the delay until a new or revoked
	// token or a changed mapping takes effect.
	RefreshInterval time.Duration
	// LimitsInterval is how often bucket rates are re-read for the limit
	// reported to Envoy (default DefaultLimitsInterval).
	LimitsInterval time.Duration
	Metrics        *Metrics
	Logger         *slog.Logger
	// now is the clock of token expiry, for tests.
	now func() time.Time
}

// Service decides. It is safe for concurrent use.
type Service struct {
	cfg  Config
	log  *slog.Logger
	snap atomic.Pointer[snapshot]
	// lastErr is the last refresh failure ("" after a success), for /readyz.
	lastErr atomic.Pointer[string]
	charge  func(ctx context.Context, acq Acquirer, wants []want) []outcome
	// logs logs what callers can cause at most once a minute per kind.
	logs *logEvery
}

// New returns a Service; call Refresh (or Run) before serving.
func New(cfg Config) *Service {
	if cfg.RefreshInterval <= 0 {
		cfg.RefreshInterval = DefaultRefreshInterval
	}
	if cfg.LimitsInterval <= 0 {
		cfg.LimitsInterval = DefaultLimitsInterval
	}
	if cfg.CriticalEntry == "" {
		cfg.CriticalEntry = DefaultCriticalEntry
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.now == nil {
		cfg.now = time.Now
	}
	s := &Service{cfg: cfg, log: cfg.Logger}
	s.charge = chargeAll
	s.logs = &logEvery{log: cfg.Logger, metrics: cfg.Metrics, now: cfg.now, kinds: map[string]*logKind{}}
	return s
}

// Refresh reloads tokens and mappings when the decision revision changed
// (or always, when force is set), and the bucket rates when they are older
// than the limits interval.
func (s *Service) Refresh(ctx context.Context, force bool) error {
	err := s.refresh(ctx, force)
	if err != nil {
		msg := err.Error()
		s.lastErr.Store(&msg)
		s.cfg.Metrics.refreshFailed()
	} else {
		s.lastErr.Store(nil)
	}
	return err
}

func (s *Service) refresh(ctx context.Context, force bool) error {
	cur := s.snap.Load()
	if cur != nil && !force {
		rev, err := s.cfg.Sources.Mappings.Revision(ctx)
		if err != nil {
			return err
		}
		if rev == cur.revision && time.Since(cur.loadedAt) < s.cfg.LimitsInterval {
			return nil
		}
	}
	next, err := s.cfg.Sources.loadConfig(ctx)
	if err != nil {
		return err
	}
	if cur != nil && next.revision == cur.revision && time.Since(cur.loadedAt) < s.cfg.LimitsInterval {
		next.limits, next.loadedAt = cur.limits, cur.loadedAt
	} else {
		if next.limits, err = s.cfg.Sources.loadLimits(ctx); err != nil {
			return err
		}
		next.loadedAt = time.Now()
	}
	if cur == nil || cur.revision != next.revision {
		s.log.Info("decision config loaded", "revision", next.revision, "mappings", next.index.Len(),
			"credentials", len(next.credentials))
	}
	s.snap.Store(next)
	return nil
}

// Run refreshes every refresh interval until ctx ends. Failures are logged
// and the last snapshot keeps serving.
func (s *Service) Run(ctx context.Context) error {
	var latch periodic.Latch
	periodic.Every(ctx, s.cfg.RefreshInterval, func(ctx context.Context) {
		err := s.Refresh(ctx, false)
		switch {
		case ctx.Err() != nil || !latch.Changed(err):
		case err != nil:
			s.log.Warn("decision config refresh failed; serving the last one", "err", err)
		default:
			s.log.Info("decision config refresh works again")
		}
	})
	return nil
}

// Loaded reports whether a snapshot was loaded, and its age and last error.
func (s *Service) Loaded() (ok bool, revision int64, lastErr string) {
	cur := s.snap.Load()
	if e := s.lastErr.Load(); e != nil {
		lastErr = *e
	}
	if cur == nil {
		return false, 0, lastErr
	}
	return true, cur.revision, lastErr
}

var (
	errNoCredential  = fmt.Errorf("missing app token: send \"Authorization: Bearer %s...\": %w", apptokens.Prefix, errs.ErrUnauthenticated)
	errBadCredential = fmt.Errorf("invalid, revoked or expired app token: %w", errs.ErrUnauthenticated)
	errNotReady      = fmt.Errorf("decision config not loaded yet: %w", errs.ErrUnavailable)
)

// Authenticate returns the app whose token the Authorization value (or a
// bare secret) carries. It does no I/O: a refused caller costs a hash and
// a map lookup, and never reaches Redis.
func (s *Service) Authenticate(authorization string) (string, error) {
	secret := strings.TrimSpace(authorization)
	if scheme, rest, ok := strings.Cut(secret, " "); ok && strings.EqualFold(scheme, "bearer") {
		secret = strings.TrimSpace(rest)
	}
	if secret == "" {
		return "", errNoCredential
	}
	cur := s.snap.Load()
	if cur == nil {
		return "", errNotReady
	}
	var buf [apptokens.DigestLen]byte
	d := apptokens.AppendDigest(buf[:0], secret)
	if len(d) == 0 {
		return "", errBadCredential
	}
	c, ok := cur.credentials[string(d)]
	if !ok || c.Scope != apptokens.ScopeAcquire || (c.ExpiresAt != nil && !s.cfg.now().Before(*c.ExpiresAt)) {
		return "", errBadCredential
	}
	return c.App, nil
}

// Code is the answer for one descriptor.
type Code int

// Codes, as Envoy numbers them.
const (
	CodeUnknown   Code = 0
	CodeOK        Code = 1
	CodeOverLimit Code = 2
)

// Descriptor is one descriptor of a request: its entries and the tokens it
// takes.
type Descriptor struct {
	Entries []descriptors.Entry
	Hits    int64
	// Refund marks Envoy's negative hits: tokens given back, which a token
	// bucket cannot take. Such a descriptor is not charged.
	Refund bool
	// Critical marks a descriptor whose acquire may take the bucket's
	// reserve.
	Critical bool
}

// SplitCritical takes the critical entry (Config.CriticalEntry) out of
// entries: the entries left, in order, and whether the descriptor is
// critical (the entry's value is "true" or "1"). Entries without it come
// back as they are.
func (s *Service) SplitCritical(entries []descriptors.Entry) ([]descriptors.Entry, bool) {
	name := s.cfg.CriticalEntry
	at := -1
	for i, e := range entries {
		if e.Key == name {
			at = i
			break
		}
	}
	if at < 0 {
		return entries, false
	}
	v := entries[at].Value
	critical := v == "1" || strings.EqualFold(v, "true")
	rest := make([]descriptors.Entry, 0, len(entries)-1)
	for _, e := range entries {
		if e.Key != name {
			rest = append(rest, e)
		}
	}
	return rest, critical
}

// Status is the answer for one descriptor.
type Status struct {
	Code Code
	// Bucket is the mapped bucket, "" when unmatched.
	Bucket string
	// Result is the client's answer when a bucket was asked.
	Result client.Result
	// Limit is the bucket's rate for Envoy, zero when unknown.
	Limit EnvoyLimit
	// Note says why a descriptor got the unmatched answer: "unmatched",
	// "unknown_bucket", "app_not_allowed", "negative_hits"; "" otherwise.
	Note string
}

// want is one acquire of a request; outcome its answer.
type want struct {
	bucket, key string
	n           int64
	critical    bool
}

// ctxFor is the context of w's acquire: marked critical when w is.
func (w want) ctxFor(ctx context.Context) context.Context {
	if w.critical {
		return client.Critical(ctx)
	}
	return ctx
}

type outcome struct {
	res client.Result
	err error
}

// allAcquirer takes the tokens of several plain buckets in one atomic
// call; the client's Limiter is one.
type allAcquirer interface {
	AcquireAll(ctx context.Context, reqs []client.Request) (client.Results, error)
}

// chargeAll charges a request whose descriptors all map to plain buckets
// atomically: either every bucket is charged or none is. A request with a
// keyed bucket, a single descriptor, more than client.MaxRequests, critical
// and other descriptors mixed, or buckets the atomic call refuses (in
// different Redis Cluster hash slots, unknown, not allowed, Redis
// unavailable) is charged one by one by chargeEach, which also gives each
// descriptor its own answer.
func chargeAll(ctx context.Context, acq Acquirer, wants []want) []outcome {
	all, ok := acq.(allAcquirer)
	if !ok || len(wants) < 2 || len(wants) > client.MaxRequests {
		return chargeEach(ctx, acq, wants)
	}
	reqs := make([]client.Request, len(wants))
	for i, w := range wants {
		if w.key != "" || w.critical != wants[0].critical {
			return chargeEach(ctx, acq, wants)
		}
		reqs[i] = client.Request{Bucket: w.bucket, N: w.n}
	}
	res, err := all.AcquireAll(wants[0].ctxFor(ctx), reqs)
	if err != nil || len(res.Each) != len(wants) {
		return chargeEach(ctx, acq, wants)
	}
	out := make([]outcome, len(wants))
	for i := range out {
		out[i].res = res.Each[i]
	}
	return out
}

// chargeEach takes every want independently, in order. It is not atomic:
// when a later bucket denies, earlier ones keep the tokens taken (as with
// Envoy's own service, where every descriptor's counter is incremented).
func chargeEach(ctx context.Context, acq Acquirer, wants []want) []outcome {
	out := make([]outcome, len(wants))
	for i, w := range wants {
		if w.key != "" {
			out[i].res, out[i].err = acq.AcquireKey(w.ctxFor(ctx), w.bucket, w.key, w.n)
		} else {
			out[i].res, out[i].err = acq.Acquire(w.ctxFor(ctx), w.bucket, w.n)
		}
	}
	return out
}

// ErrInvalidHits: a descriptor asks for more tokens than any bucket holds.
var ErrInvalidHits = errors.New("hits must be between 1 and 1000000000")

// MaxDescriptors bounds the descriptors of one request: each may cost a
// Redis call, and Envoy's routes rarely carry more than a handful.
const MaxDescriptors = 64

// ShouldRateLimit decides a request of app in domain: each descriptor is
// mapped and charged, and the request is allowed only when every
// descriptor is. The error is for the request as a whole (bad input, the
// caller gone); a bucket's problems become statuses.
func (s *Service) ShouldRateLimit(ctx context.Context, app, domain string, ds []Descriptor) ([]Status, Code, error) {
	cur := s.snap.Load()
	if cur == nil {
		return nil, CodeUnknown, errNotReady
	}
	if domain == "" {
		return nil, CodeUnknown, errs.Invalid("domain", "is required")
	}
	if len(ds) > MaxDescriptors {
		return nil, CodeUnknown, errs.Invalid("descriptors", fmt.Sprintf("at most %d per request", MaxDescriptors))
	}
	statuses := make([]Status, len(ds))
	wants := make([]want, 0, len(ds))
	at := make([]int, 0, len(ds)) // statuses index of each want
	for i, d := range ds {
		if d.Hits < 1 || d.Hits > redisscript.MaxN {
			return nil, CodeUnknown, fmt.Errorf("descriptor %d: %w: %w", i+1, ErrInvalidHits, errs.ErrInvalid)
		}
		if d.Refund {
			statuses[i] = s.unmatched("negative_hits")
			continue
		}
		m := cur.index.Match(app, domain, d.Entries)
		if m == nil {
			statuses[i] = s.unmatched("unmatched")
			continue
		}
		key := m.Key(d.Entries)
		if m.KeyFrom != "" && key == "" {
			statuses[i] = s.unmatched("unmatched")
			continue
		}
		if err := CheckKey(key); err != nil {
			return nil, CodeUnknown, fmt.Errorf("descriptor %d: entry %q: %w", i+1, m.KeyFrom, err)
		}
		statuses[i].Bucket = m.Bucket
		wants = append(wants, want{bucket: m.Bucket, key: key, n: d.Hits, critical: d.Critical})
		at = append(at, i)
	}
	if len(wants) > 0 {
		acq, err := s.cfg.Acquirers.For(app)
		if err != nil {
			return nil, CodeUnknown, err
		}
		for j, o := range s.charge(ctx, acq, wants) {
			if o.err != nil && ctx.Err() != nil {
				return nil, CodeUnknown, ctx.Err()
			}
			i := at[j]
			statuses[i] = s.status(statuses[i].Bucket, o, cur)
		}
	}
	overall := CodeOK
	for i := range statuses {
		if statuses[i].Code == CodeOverLimit {
			overall = CodeOverLimit
		}
	}
	return statuses, overall, nil
}

func (s *Service) unmatched(note string) Status {
	s.cfg.Metrics.unmatched(note)
	if s.cfg.Unmatched == UnmatchedDeny {
		return Status{Code: CodeOverLimit, Note: note}
	}
	return Status{Code: CodeOK, Note: note}
}

// status turns a client answer into a descriptor status.
func (s *Service) status(bucket string, o outcome, cur *snapshot) Status {
	st := Status{Bucket: bucket, Result: o.res, Limit: cur.limits[bucket]}
	switch {
	case o.err == nil && o.res.Allowed:
		st.Code = CodeOK
	case o.err == nil, errors.Is(o.err, client.ErrExceedsCapacity), errors.Is(o.err, client.ErrUnavailable):
		// Denied, never grantable, or refused by the failure policy.
		st.Code = CodeOverLimit
	case errors.Is(o.err, client.ErrUnknownBucket):
		return s.misconfigured(bucket, "unknown_bucket", o.err)
	case errors.Is(o.err, client.ErrAppNotAllowed):
		return s.misconfigured(bucket, "app_not_allowed", o.err)
	default:
		s.logs.emit(slog.LevelError, logInternal, "acquire failed", "bucket", bucket, "err", o.err)
		st.Code = CodeOverLimit
	}
	return st
}

func (s *Service) misconfigured(bucket, note string, err error) Status {
	s.logs.emit(slog.LevelWarn, logMisconfigured, "descriptor mapping cannot be served; answering as unmatched",
		"bucket", bucket, "err", err)
	st := s.unmatched(note)
	st.Bucket = bucket
	return st
}

// CheckKey refuses a key no bucket can take: more than
// redisscript.MaxKeyLength bytes, or not valid UTF-8. U+FFFD is refused too:
// it is what JSON decoding and many proxies put in place of invalid bytes,
// so different keys would share one key's tokens. The empty key is the
// caller's to refuse (it means "no key").
func CheckKey(key string) error {
	switch {
	case len(key) > redisscript.MaxKeyLength:
		return errs.Invalid("key", fmt.Sprintf("must be at most %d bytes, got %d", redisscript.MaxKeyLength, len(key)))
	case !utf8.ValidString(key) || strings.ContainsRune(key, utf8.RuneError):
		return errs.Invalid("key", "must be valid UTF-8, without U+FFFD (the stand-in for invalid bytes)")
	}
	return nil
}

// Acquire is the HTTP API's call: n tokens of bucket (of key, for a keyed
// bucket) as app; a ctx marked client.Critical may take the bucket's
// reserve. Errors are the client's.
func (s *Service) Acquire(ctx context.Context, app, bucket, key string, n int64) (client.Result, error) {
	acq, err := s.cfg.Acquirers.For(app)
	if err != nil {
		return client.Result{}, err
	}
	if key != "" {
		return acq.AcquireKey(ctx, bucket, key, n)
	}
	return acq.Acquire(ctx, bucket, n)
}
