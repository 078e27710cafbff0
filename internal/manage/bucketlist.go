package manage

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/redisscript"
	"github.com/sluicehq/sluice/internal/usage"
)

// BucketOrder is the order of a bucket list.
type BucketOrder string

// Orders of a bucket list.
const (
	// ByName is the default: every bucket, by name, in pages.
	ByName BucketOrder = ""
	// MostDenied lists the buckets that denied something in the last hour,
	// most denials first (the roll-up's ranking).
	MostDenied BucketOrder = "denied"
	// NearestLimit orders a page by its fill level now, emptiest first.
	NearestLimit BucketOrder = "fill"
)

// ParseBucketOrder reads an order from a query; anything unknown is ByName.
func ParseBucketOrder(s string) BucketOrder {
	switch o := BucketOrder(s); o {
	case MostDenied, NearestLimit:
		return o
	}
	return ByName
}

// BucketListQuery selects one page of the bucket list with its state.
type BucketListQuery struct {
	// BucketQuery filters; its After and Before are bucket names in name
	// order, and the cursors of a ranked list (see Ranked) otherwise.
	BucketQuery
	Order BucketOrder
	// Denied keeps the buckets that denied something in the last hour.
	Denied bool
	// NearLimit keeps the buckets that ran near their limit in the last
	// hour (usage.NearLimit): they refused an acquire or would have, or at
	// least one in ten of their acquires left them at least 80% used
	// (redisscript.NearLimitUsed).
	NearLimit bool
}

// Ranked reports whether the list is ranked by the last hour's usage
// (most denied, or a filter on the last hour) rather than by name.
func (q BucketListQuery) Ranked() bool { return q.Order == MostDenied || q.Denied || q.NearLimit }

// Rank is the order of a ranked list: denials, unless only near-limit
// buckets are asked for (then near-limit acquires).
func (q BucketListQuery) Rank() buckets.Rank {
	if q.NearLimit && !q.Denied && q.Order != MostDenied {
		return buckets.RankNearLimit
	}
	return buckets.RankDenied
}

// BucketRow is one bucket of the list with its state.
type BucketRow struct {
	*buckets.Bucket
	// Live is the bucket's state in Redis now; LiveOK is false when it
	// could not be read.
	Live   redisscript.State
	LiveOK bool
	// Recent is the last hour of usage; RecentOK is false when unknown.
	Recent   usage.Recent
	RecentOK bool
}

// Fill is the bucket's fill level now, from 0 to 1 (1 when unknown).
func (r BucketRow) Fill() float64 {
	if !r.LiveOK || !r.Live.Exists || r.Live.Config.Capacity <= 0 {
		return 1
	}
	return r.Live.Tokens / float64(r.Live.Config.Capacity)
}

// BucketList is one page of the bucket list.
type BucketList struct {
	Rows []BucketRow
	// Next and Prev are the cursors of the next and the previous page
	// (After and Before of a BucketListQuery); "" on the last or first.
	Next, Prev string
	Total      int
	// Offset is how many buckets come before this page. TotalMore says a
	// ranked list has more than Total (buckets.MaxRankedTotal) buckets.
	Offset    int
	TotalMore bool
	// Rank is the order of a ranked list, "" in name order.
	Rank buckets.Rank
	// LiveErr and RecentErr say why a part could not be read.
	LiveErr, RecentErr error
}

// ListBucketStates returns one page of the buckets the caller may see,
// each with its fill level now (one pipelined HMGET per bucket of the
// page) and its last hour (the roll-up in MySQL, by primary key). Redis is
// never scanned: the load on it is bounded by the page size. Ranked lists
// read the roll-up's index with a keyset cursor (buckets.Store.ListRanked):
// their cost depends on the page and the buckets used in the last hour,
// not on how many buckets exist.
func (s *Service) ListBucketStates(ctx context.Context, c Caller, q BucketListQuery) (*BucketList, error) {
	out := &BucketList{}
	var page []*buckets.Bucket
	if q.Ranked() {
		out.Rank = q.Rank()
		p, err := s.buckets.ListRanked(ctx, buckets.RankedFilter{
			Filter: buckets.Filter{Search: q.Search, App: q.App, Limit: q.Limit, VisibleTo: s.Visible(c)},
			Rank:   out.Rank, Denied: q.Denied || q.Order == MostDenied, NearLimit: q.NearLimit,
			After: buckets.ParseRankCursor(q.After), Before: buckets.ParseRankCursor(q.Before)})
		if err != nil {
			return nil, err
		}
		page, out.Next, out.Prev, out.Total, out.Offset, out.TotalMore = p.Buckets, p.Next, p.Prev, p.Total, p.Offset, p.More
	} else {
		p, err := s.ListBuckets(ctx, c, q.BucketQuery)
		if err != nil {
			return nil, err
		}
		page, out.Next, out.Prev, out.Total, out.Offset = p.Buckets, p.Next, p.Prev, p.Total, p.Offset
	}
	names := make([]string, len(page))
	for i, b := range page {
		names[i] = b.Name
	}
	states, recents, liveErr, recentErr := s.pageState(ctx, names)
	out.LiveErr, out.RecentErr = liveErr, recentErr
	for _, b := range page {
		r := BucketRow{Bucket: b}
		r.Live, r.LiveOK = states[b.Name]
		r.Recent, r.RecentOK = recents[b.Name]
		out.Rows = append(out.Rows, r)
	}
	if q.Order == NearestLimit {
		slices.SortStableFunc(out.Rows, func(a, b BucketRow) int { return cmp.Compare(a.Fill(), b.Fill()) })
	}
	return out, nil
}

// pageState reads the live state and the last hour of a page of buckets,
// both at once.
func (s *Service) pageState(ctx context.Context, names []string) (map[string]redisscript.State, map[string]usage.Recent, error, error) {
	var recents map[string]usage.Recent
	var recentErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		recents, recentErr = s.recents.For(ctx, names)
		if recentErr != nil {
			s.log.WarnContext(ctx, "read recent usage", "err", recentErr)
		}
	}()
	states, liveErr := s.readMany(ctx, names)
	<-done
	return states, recents, liveErr, recentErr
}

func (s *Service) readMany(ctx context.Context, names []string) (map[string]redisscript.State, error) {
	if s.rdb == nil {
		return nil, ErrNoRedis
	}
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	st, err := redisscript.ReadMany(ctx, s.rdb, s.ks, names)
	if err != nil {
		s.log.WarnContext(ctx, "read bucket states from redis", "err", err)
		return nil, fmt.Errorf("read live state: %w: %w", errs.ErrUnavailable, err)
	}
	return st, nil
}

// MaxStateNames bounds the names of one BucketStates call: a page.
const MaxStateNames = 100

// BucketStates returns the live state of the buckets of names the caller
// may see, in one pipelined read; names the caller may not see (or that
// do not exist) are left out, as a list leaves them out.
func (s *Service) BucketStates(ctx context.Context, c Caller, names []string) ([]*buckets.Bucket, map[string]redisscript.State, error) {
	if len(names) > MaxStateNames {
		return nil, nil, errs.Invalid("names", fmt.Sprintf("at most %d buckets at once", MaxStateNames))
	}
	var seen []*buckets.Bucket
	var visible []string
	for _, n := range names {
		if !redisscript.ValidName(n) || slices.Contains(visible, n) {
			continue
		}
		b, err := s.buckets.Get(ctx, n)
		if errors.Is(err, errs.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		if !s.IsAdmin(c) && (c.User == nil || !s.enf.CanSeeBucket(c.Name(), b.OwnerApp, b.AllowedApps)) {
			continue
		}
		seen = append(seen, b)
		visible = append(visible, n)
	}
	st, err := s.readMany(ctx, visible)
	if err != nil {
		return nil, nil, err
	}
	return seen, st, nil
}

// PreviewLimit asks what a capacity, reserve and rate, as a form gives
// them, would do to a traffic pattern of requests not marked critical.
// Empty pattern fields take ParsePattern's defaults; an empty reserve is
// none.
type PreviewLimit struct {
	// Kind is the limit's kind: a token bucket when empty, or a
	// concurrency limit, whose calls each last Hold seconds ("" is 1).
	Kind                           string
	Capacity, Rate, Reserve        string
	Steady, Burst, Every, Duration string
	Hold                           string
}

// LimitPreview is a limit in plain words and its simulation.
type LimitPreview struct {
	Rate    buckets.Rate
	Summary string
	// Reserve is the reserve, and ReserveSummary what it does in plain
	// words ("" for none).
	Reserve        int64
	ReserveSummary string
	Simulation     buckets.Simulation
}

// PreviewLimit simulates req's pattern against its limit; it saves
// nothing and needs no role (it reads nothing stored). Every problem of
// the limit or the pattern is reported at once, per field.
func (s *Service) PreviewLimit(req PreviewLimit) (LimitPreview, error) {
	if buckets.Kind(req.Kind).Or() == buckets.KindConcurrency {
		return previewSlots(req)
	}
	v := &errs.Validation{}
	capacity, err := buckets.ParseMaxPermits(req.Capacity)
	if err != nil {
		v.Fields = append(v.Fields, errs.Fields(err).Fields...)
	}
	rate, err := buckets.ParseRate(req.Rate)
	if err != nil {
		v.Add("rate", errs.Fields(err).For("rate"))
	}
	reserve, err := buckets.ParseReserve(req.Reserve)
	if err != nil {
		v.Fields = append(v.Fields, errs.Fields(err).Fields...)
	} else if r := buckets.ReserveProblem(reserve, capacity); v.For("max_permits") == "" && r != "" {
		v.Add("reserve", r)
	}
	p, err := buckets.ParsePattern(req.Steady, req.Burst, req.Every, req.Duration)
	if err != nil {
		v.Fields = append(v.Fields, errs.Fields(err).Fields...)
	}
	if err := v.Err(); err != nil {
		return LimitPreview{}, err
	}
	sim, err := buckets.Simulate(capacity, reserve, rate, p)
	if err != nil {
		return LimitPreview{}, err
	}
	return LimitPreview{Rate: rate, Summary: buckets.Summary(capacity, rate), Reserve: reserve,
		ReserveSummary: buckets.ReserveSummary(capacity, reserve), Simulation: sim}, nil
}

// previewSlots simulates req's pattern against a concurrency limit whose
// calls each last req.Hold seconds. The sustained line of its chart is the
// most calls a second the limit lets through, limit / hold (Little's law).
func previewSlots(req PreviewLimit) (LimitPreview, error) {
	v := &errs.Validation{}
	limit, err := buckets.ParseMaxPermits(req.Capacity)
	if err != nil {
		v.Fields = append(v.Fields, errs.Fields(err).Fields...)
	}
	hold := time.Second
	if h := strings.TrimSpace(req.Hold); h != "" {
		f, err := strconv.ParseFloat(h, 64)
		if err != nil || math.IsNaN(f) || f <= 0 || f > buckets.MaxHold.Seconds() {
			v.Add("hold", "must be a number of seconds, more than 0 and at most 3600")
		} else {
			hold = time.Duration(math.Round(f * float64(time.Second)))
		}
	}
	p, err := buckets.ParsePattern(req.Steady, req.Burst, req.Every, req.Duration)
	if err != nil {
		v.Fields = append(v.Fields, errs.Fields(err).Fields...)
	}
	if err := v.Err(); err != nil {
		return LimitPreview{}, err
	}
	sim, err := buckets.SimulateSlots(limit, hold, p)
	if err != nil {
		return LimitPreview{}, err
	}
	// limit calls per hold, as a rate the chart draws (its permits in
	// millionths per the hold; at most 10^9 x 10^6, in a Rate's range).
	rate := buckets.Rate{PermitsMicro: limit * 1_000_000, Period: hold}
	summary := fmt.Sprintf("At most %d calls in progress at once: at %v each, at most %s calls a second.",
		limit, hold, strconv.FormatFloat(float64(limit)/hold.Seconds(), 'g', 4, 64))
	return LimitPreview{Rate: rate, Summary: summary, Simulation: sim}, nil
}
