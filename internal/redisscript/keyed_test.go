package redisscript_test

import (
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/internal/redisscript"
)

// The example of docs/protocol.md.
func TestKeyHashExample(t *testing.T) {
	state, g := redisscript.KeyHash("api", "user-1")
	if state != "erA-XA04bAs" || g != 54 {
		t.Fatalf("KeyHash(api, user-1) = %s, %d", state, g)
	}
	k := redisscript.Keyspace{}.Keyed("api", "user-1")
	if k.Config != "sluice:k{api:54}" || k.State != "sluice:{CPN}2erA-XA04bAs" {
		t.Fatalf("keys = %+v", k)
	}
	// The state lives in its group's Cluster slot.
	if tag := redisscript.SlotTag(redisscript.Slot("api:54")); redisscript.Slot(string(tag[:])) != redisscript.Slot("api:54") {
		t.Fatalf("tag %s of slot %d", tag, redisscript.Slot("api:54"))
	}
}

// Every slot has a tag, and the tags are the first of their slot in
// base64url order (the rule docs/protocol.md states for other clients).
func TestSlotTags(t *testing.T) {
	if s := redisscript.Slot("123456789"); s != 0x31C3%16384 {
		t.Fatalf("Slot(123456789) = %d, want CRC16 0x31C3", s)
	}
	for slot := range 16384 {
		tag := redisscript.SlotTag(slot)
		if redisscript.Slot(string(tag[:])) != slot {
			t.Fatalf("SlotTag(%d) = %s of slot %d", slot, tag, redisscript.Slot(string(tag[:])))
		}
	}
}

func TestKeyGroupsSpread(t *testing.T) {
	seen := make([]int, redisscript.KeyGroups)
	for i := range 10_000 {
		g := redisscript.GroupOf(fmt.Sprintf("user-%d", i))
		seen[g]++
	}
	for g, n := range seen {
		// 156 expected per group.
		if n < 100 || n > 220 {
			t.Errorf("group %d got %d of 10000 keys", g, n)
		}
	}
}
