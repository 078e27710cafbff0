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
	// Events name the changes (create, update, create plain); the sync
	// worker reads the shadow flag with the rest of the definition.
	events, err := s.PendingEvents(ctx, 0)
	if err != nil || len(events) != 3 || events[0].Version != 1 || events[1].Version != 2 || events[2].Name != "plain" {
		t.Errorf("events (create, update, create plain): %+v, %v", events, err)
	}
}
