package buckets

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/jmoiron/sqlx"

	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/redisscript/names"
)

// Ranked lists order buckets by their last hour of usage, as the roll-up
// of package usage keeps it in table bucket_usage (one row per bucket
// with usage in the last hour, written only by the roll-up, read here).
// The rows are read in the order of an index on the ranked count and the
// name, joined with the buckets by name, and paged with a keyset cursor
// (the count and the name of the row a page starts after, and its
// position, for "26–50 of 300"): a page costs the rows of the page plus
// the rows the filters skip, never a sort of every bucket nor an offset to
// walk past. The total is counted up to MaxRankedTotal, in index order.

// Rank is what a ranked list orders by, most first.
type Rank string

// Ranks of a ranked list.
const (
	// RankDenied orders by the acquires denied in the last hour.
	RankDenied Rank = "denied"
	// RankNearLimit orders the buckets that ran near their limit in the
	// last hour (usage.NearLimit, which the roll-up applies when it stores
	// near_total) by their acquires that left them near it.
	RankNearLimit Rank = "near"
)

// column is the bucket_usage column of the rank, indexed with the name.
func (r Rank) column() string {
	if r == RankNearLimit {
		return "u.near_total"
	}
	return "u.denied_total"
}

// MaxRankedTotal is as far as a ranked list counts its buckets: counting
// reads the index up to it, so a page costs the same with 100 or 10,000
// buckets used in the last hour.
const MaxRankedTotal = 1000

// RankCursor is a position in a ranked list: the ranked count and the
// name of a bucket, and its place in the list (from 0) when the cursor
// was made, which only numbers the rows shown ("26–50").
type RankCursor struct {
	Count int64
	Name  string
	Pos   int
}

// String writes the cursor as "<count>:<name>:<pos>", the form
// ParseRankCursor reads; the zero cursor is "".
func (c RankCursor) String() string {
	if c.Name == "" {
		return ""
	}
	return strconv.FormatInt(c.Count, 10) + ":" + c.Name + ":" + strconv.Itoa(c.Pos)
}

// ParseRankCursor reads what RankCursor.String wrote; anything else is
// the zero cursor (the first page), as a damaged link is not worth an
// error page.
func ParseRankCursor(s string) RankCursor {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return RankCursor{}
	}
	count, err1 := strconv.ParseInt(parts[0], 10, 64)
	pos, err2 := strconv.Atoi(parts[2])
	if err1 != nil || err2 != nil || count < 0 || pos < 0 || !names.Valid(parts[1]) {
		return RankCursor{}
	}
	return RankCursor{Count: count, Name: parts[1], Pos: pos}
}

// RankedFilter selects a page of a ranked list.
type RankedFilter struct {
	// Search, App, VisibleTo and Limit select as in List; After and Before
	// are not used (see the cursors below).
	Filter
	// Rank is the order: the ranked count, most first, then by name in
	// reverse (the order one index gives without a sort). Only buckets
	// whose ranked count is above zero are listed. The zero Rank is
	// RankDenied.
	Rank Rank
	// Denied and NearLimit keep only the buckets that denied something,
	// or ran near their limit, in the last hour.
	Denied, NearLimit bool
	// After asks for the page that follows the bucket at this cursor; else
	// Before, for the page that ends just before it; else the first page.
	After, Before RankCursor
}

// RankedPage is one page of a ranked list.
type RankedPage struct {
	Buckets []*Bucket
	// Counts holds the ranked count of each bucket of Buckets, as of the
	// last roll-up.
	Counts []int64
	// Next is the After cursor of the next page, Prev the Before cursor of
	// the previous one; "" on the last and the first page.
	Next, Prev string
	// Total counts the buckets of the list on all pages, up to
	// MaxRankedTotal; More says there are more than that. Offset is how
	// many are ranked before this page (as the cursor that led here
	// counted them).
	Total, Offset int
	More          bool
}

// rankedRow is a bucket with its ranked count.
type rankedRow struct {
	row
	Count int64 `db:"rank_count"`
}

// ListRanked returns one page of the buckets f selects, in f.Rank's order.
func (s *Store) ListRanked(ctx context.Context, f RankedFilter) (RankedPage, error) {
	limit := database.PageSize(f.Limit)
	if f.Rank != RankNearLimit {
		f.Rank = RankDenied
	}
	if f.VisibleTo != nil {
		f.VisibleTo = slices.DeleteFunc(slices.Clone(f.VisibleTo), func(n string) bool { return !names.Valid(n) })
	}
	if (f.VisibleTo != nil && len(f.VisibleTo) == 0) || (f.App != "" && !names.Valid(f.App)) || !utf8.ValidString(f.Search) {
		return RankedPage{Buckets: []*Bucket{}}, nil
	}
	col := f.Rank.column()
	from := ` FROM bucket_usage u JOIN buckets b ON b.name = u.bucket_name JOIN apps o ON o.id = b.owner_app_id`
	// Search, app and visibility as the bucket list's conditions: each
	// row of the index walk is checked by two lookups in memory.
	where, args := f.conditions()
	where = append(where, col+" > 0")
	if f.Denied && f.Rank != RankDenied {
		where = append(where, "u.denied_total > 0")
	}
	if f.NearLimit && f.Rank != RankNearLimit {
		where = append(where, "u.near_total > 0")
	}
	var page RankedPage
	// Counted no further than MaxRankedTotal + 1: in index order when
	// nothing filters the buckets, else in the order the server finds
	// cheapest (from the app's buckets, usually).
	countOrder := ""
	if f.Search == "" && f.App == "" && f.VisibleTo == nil {
		countOrder = ` ORDER BY ` + col + ` DESC, u.bucket_name DESC`
	}
	total, err := database.Count(ctx, s.db, `SELECT COUNT(*) FROM (SELECT 1`+from+` WHERE `+strings.Join(where, " AND ")+
		countOrder+` LIMIT ?) t`, append(slices.Clone(args), MaxRankedTotal+1)...)
	if err != nil {
		return RankedPage{}, fmt.Errorf("count ranked buckets: %w", err)
	}
	page.Total = total
	if page.Total > MaxRankedTotal {
		page.Total, page.More = MaxRankedTotal, true
	}

	// Rows ranked after (c, n): a lower count, or the same and a name
	// before n. Both ranges are one index range each.
	after := "(" + col + " < ? OR (" + col + " = ? AND u.bucket_name < ?))"
	before := "(" + col + " > ? OR (" + col + " = ? AND u.bucket_name > ?))"
	backward := f.After.Name == "" && f.Before.Name != ""
	q := slices.Clone(where)
	qargs := slices.Clone(args)
	order := ` ORDER BY ` + col + ` DESC, u.bucket_name DESC LIMIT ?`
	switch {
	case f.After.Name != "":
		q = append(q, after)
		qargs = append(qargs, f.After.Count, f.After.Count, f.After.Name)
	case backward:
		q = append(q, before)
		qargs = append(qargs, f.Before.Count, f.Before.Count, f.Before.Name)
		order = ` ORDER BY ` + col + ` ASC, u.bucket_name ASC LIMIT ?`
	}
	qargs = append(qargs, limit+1)
	query, qargs, err := sqlx.In(bucketColumns+`, `+col+` AS rank_count`+from+` WHERE `+strings.Join(q, " AND ")+order, qargs...)
	if err != nil {
		return RankedPage{}, fmt.Errorf("list ranked buckets: %w", err)
	}
	var rows []rankedRow
	if err := s.db.SelectContext(ctx, &rows, query, qargs...); err != nil {
		return RankedPage{}, fmt.Errorf("list ranked buckets: %w", database.Translate(err))
	}
	more := len(rows) > limit
	rows, next, prev := database.Keyset(rows, limit, backward, f.After.Name != "")
	for i := range rows {
		b, err := rows[i].bucket()
		if err != nil {
			return RankedPage{}, fmt.Errorf("list ranked buckets: %w", err)
		}
		page.Buckets = append(page.Buckets, b)
		page.Counts = append(page.Counts, rows[i].Count)
	}
	// The offset: the rows ranked before this page, as the cursor saw
	// them; a page back that reaches the top is the first page.
	switch {
	case f.After.Name != "":
		page.Offset = f.After.Pos + 1
	case backward && more:
		page.Offset = max(f.Before.Pos-len(rows), 1)
	}
	cursor := func(i int) string {
		return RankCursor{Count: rows[i].Count, Name: rows[i].Name, Pos: page.Offset + i}.String()
	}
	if next >= 0 {
		page.Next = cursor(next)
	}
	if prev >= 0 {
		page.Prev = cursor(prev)
	}
	if page.Buckets == nil {
		page.Buckets = []*Bucket{}
	}
	if err := withApps(ctx, s.db, page.Buckets, false); err != nil {
		return RankedPage{}, err
	}
	return page, nil
}
