package console

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/buckets"
	"github.com/sluicehq/sluice/internal/database"
)

// A ranked list longer than it counts says "more than N buckets": that
// branch only shows past buckets.MaxRankedTotal buckets, which no page test
// creates, and it once failed to render.
func TestBucketsPageRendersCappedTotal(t *testing.T) {
	v, err := parseViews()
	if err != nil {
		t.Fatal(err)
	}
	v.log = slog.New(slog.DiscardHandler)
	p := &bucketsPage{layout: layout{Title: "Buckets"}, Order: "denied", Ranked: "Most denials in the last hour first.",
		From: 26, To: 26, Total: buckets.MaxRankedTotal, TotalMore: true,
		Rows: []bucketRow{{Bucket: &buckets.Bucket{Name: "checkout", OwnerApp: "shop",
			Stamp: database.Stamp{CreatedAt: time.Now(), UpdatedAt: time.Now()}}}}}
	w := httptest.NewRecorder()
	v.execute(w, http.StatusOK, "buckets", p)
	if w.Code != http.StatusOK {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	if body := w.Body.String(); !strings.Contains(body, "more than 1,000 buckets") {
		t.Fatalf("page lacks the capped count:\n%s", body)
	}
}
