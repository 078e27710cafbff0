package buckets_test

import (
	"testing"
)

// TestShadowIsStoredAndSynced: the shadow flag is saved, read back,
// changed by an update and carried by every change event.
func TestShadowIsStoredAndSynced(t *testing.T) {
	_, s := setup(t)
	b := newBucket(t, "trial")
	b.Shadow = true
	create(t, s, b)
	got, err := s.Get(ctx, "trial")
	if err != nil || !got.Shadow {
		t.Fatalf("get after create: %+v %v", got, err)
	}
	got.Shadow = false
	if err := s.Update(ctx, alice, got); err != nil {
		t.Fatal(err)
	}
	if again, err := s.Get(ctx, "trial"); err != nil || again.Shadow {
		t.Fatalf("get after update: %+v %v", again, err)
	}
	if plain := create(t, s, newBucket(t, "plain")); plain.Shadow {
		t.Fatal("a bucket is in shadow mode by default")
	}
	events, err := s.PendingEvents(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	var shadows []bool
	for _, e := range events {
		shadows = append(shadows, e.Shadow)
	}
	if len(shadows) != 3 || !shadows[0] || shadows[1] || shadows[2] {
		t.Errorf("shadow of the events (create, update, create plain): %v", shadows)
	}
}
