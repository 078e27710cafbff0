package accounts

import (
	"context"
	"strings"
	"testing"
)

// FuzzDecode: no stored hash, however corrupted, makes decoding panic, and
// whatever decodes stays within the bounds that cap a verification's cost.
func FuzzDecode(f *testing.F) {
	h := newHasher(HashParams{Time: 1, Memory: 64, Threads: 1})
	good, err := h.hash(context.Background(), "correct horse battery")
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{good, "", "$", "$argon2id$v=19$m=0,t=0,p=0$$", "$argon2id$v=19$m=65536,t=1,p=256$AAAA$AAAA",
		"$argon2i$v=19$m=64,t=1,p=1$c2FsdHNhbHQ$a2V5a2V5a2V5a2V5a2V5", strings.Replace(good, "t=1", "t=99", 1)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, salt, key, err := decode(s)
		if err != nil {
			return
		}
		if p.Time == 0 || p.Time > maxTime || p.Memory > maxMemory || p.Threads == 0 || len(salt) < 8 || len(key) < 16 || len(key) > 64 {
			t.Fatalf("decode(%q) accepted %+v, salt %d, key %d bytes", s, p, len(salt), len(key))
		}
	})
}

func TestVerify(t *testing.T) {
	ctx := context.Background()
	h := newHasher(HashParams{Time: 1, Memory: 64, Threads: 1})
	enc, err := h.hash(ctx, "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	enc2, err := h.hash(ctx, "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	if enc == enc2 {
		t.Fatal("two hashes of one password are equal: no salt")
	}
	for _, tt := range []struct {
		password, encoded string
		ok, outdated      bool
	}{
		{"correct horse battery", enc, true, false},
		{"correct horse batterx", enc, false, false},
		{"correct horse battery", strings.Replace(enc, "m=64", "m=128", 1), false, true},
		{"correct horse battery", "garbage", false, false},
		{"correct horse battery", enc[:len(enc)-2], false, false},
	} {
		ok, outdated, err := h.verify(ctx, tt.password, tt.encoded)
		if err != nil || ok != tt.ok || outdated != tt.outdated {
			t.Errorf("verify(%q, %q) = %v, %v, %v; want %v, %v", tt.password, tt.encoded, ok, outdated, err, tt.ok, tt.outdated)
		}
	}
	// A cancelled context while every slot is taken ends the wait.
	for range cap(h.slots) {
		h.slots <- struct{}{}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := h.verify(cctx, "x", enc); err == nil {
		t.Fatal("verify waited past a cancelled context")
	}
}
