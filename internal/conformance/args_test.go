package conformance_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/redisscript"
)

// argForms lists, per argument of a script, the forms it must accept and
// those it must refuse: exactly the formats of docs/protocol.md.
type argForms struct {
	arg      int // index into the argument list
	name     string
	accepted []string
	rejected []string
}

// Forms every integer argument refuses, whatever its range: tonumber in Lua
// takes most of them.
var notPlainIntegers = []string{"1e1", "0x10", " 1", "1 ", "+1", "01", "1.0", "1.5", "", "abc", "nan", "inf", "-inf", "1,0", "1\n", "１"}

var applyForms = []argForms{
	{0, "id", []string{"1", "42", "9007199254740991"},
		append([]string{"0", "-1", "9007199254740992", "99999999999999999", "00"}, notPlainIntegers...)},
	{1, "version", []string{"0", "1", "9007199254740991"},
		append([]string{"-1", "00", "9007199254740992"}, notPlainIntegers...)},
	{2, "capacity", []string{"1", "10", "1000000000"},
		append([]string{"0", "-1", "1000000001", "10000000000"}, notPlainIntegers...)},
	{3, "permits", []string{"0.000001", "0.5", "1", "100", "1.000001", "123.456789", "1000000000", "999999999.999999"},
		[]string{"0", "0.0", "0.000000", "0.0000001", "1.0", "1.50", "10.", "1.", ".5", "00.5", "01", "1e1", "1E1", "0x10", " 1",
			"1 ", "+1", "-1", "-0.5", "1,5", "", "nan", "inf", "1000000000.000001", "1000000001", "99999999999", "1.2.3", "1..5"}},
	{4, "period", []string{"1", "60", "31536000"},
		append([]string{"0", "-1", "31536001"}, notPlainIntegers...)},
	{5, "apps", []string{",a,", ",checkout,billing,", ",a.b_c-d,", ",0,", "," + strings.Repeat("a", 63) + ",", ",a,a,"},
		[]string{"", ",", ",,", "a", "a,", ",a", ",A,", ",a,,b,", ", a,", ",a ,", ",a b,", ",-a,", ",_a,", ",.a,",
			"," + strings.Repeat("a", 64) + ",", ",a*,", ",a%,", ",é,", "a,b"}},
	{6, "force", []string{"0", "1"}, []string{"", "2", "true", " 1", "01", "-0", "1.0"}},
	{7, "lease_ms", []string{"0", "10", "10000"}, append([]string{"-1", "10001", "00"}, notPlainIntegers...)},
	{8, "shadow", []string{"0", "1"}, []string{"", "2", "true", " 1", "01", "-0", "1.0", "yes"}},
}

func TestApplyArgumentFormats(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		ctx := context.Background()
		valid := []any{"1", "1", "10", "1", "1", ",svc,", "0", "0", "0"}
		i := 0
		for _, f := range applyForms {
			for _, v := range f.accepted {
				i++
				name := fmt.Sprintf("ok%d", i)
				args := append([]any(nil), valid...)
				args[f.arg] = v
				out, err := redisscript.ApplyRaw(ctx, s.rdb, s.ks, name, args...)
				if err != nil || out != int64(redisscript.Created) {
					t.Errorf("%s %q refused: %v %v", f.name, v, out, err)
					continue
				}
				if f.arg == 8 {
					if got := s.fields(t, name)[redisscript.FieldShadow]; got != v {
						t.Errorf("shadow %q stored as %q", v, got)
					}
				}
				if f.arg >= 2 && f.arg <= 5 {
					// Config arguments are stored as sent: canonical forms only,
					// so equal configs are equal strings.
					field := []string{redisscript.FieldCapacity, redisscript.FieldPermits, redisscript.FieldPeriod,
						redisscript.FieldApps}[f.arg-2]
					if got := s.fields(t, name)[field]; got != v {
						t.Errorf("%s %q stored as %q", f.name, v, got)
					}
				}
			}
			for _, v := range f.rejected {
				i++
				name := fmt.Sprintf("bad%d", i)
				args := append([]any(nil), valid...)
				args[f.arg] = v
				out, err := redisscript.ApplyRaw(ctx, s.rdb, s.ks, name, args...)
				if err == nil || !strings.Contains(err.Error(), "sluice apply: invalid "+f.name) {
					t.Errorf("%s %q: got %v, %v; want an invalid %s error", f.name, v, out, err, f.name)
				}
				if n, _ := s.rdb.Exists(ctx, s.ks.Bucket(name), s.ks.Tombstone(name)).Result(); n != 0 {
					t.Errorf("%s %q: a refused apply wrote keys", f.name, v)
				}
			}
		}
		// A missing argument is refused, not read as zero.
		if _, err := redisscript.ApplyRaw(ctx, s.rdb, s.ks, "short", valid[:6]...); err == nil ||
			!strings.Contains(err.Error(), "invalid force") {
			t.Errorf("apply without force: %v", err)
		}
		// lease_ms and shadow may be left out (older writers): both off.
		for _, args := range [][]any{valid[:7], valid[:8]} {
			i++
			name := fmt.Sprintf("old%d", i)
			if out, err := redisscript.ApplyRaw(ctx, s.rdb, s.ks, name, args...); err != nil || out != int64(redisscript.Created) {
				t.Errorf("apply with %d arguments: %v %v", len(args), out, err)
			}
			if got := s.fields(t, name)[redisscript.FieldShadow]; got != "0" {
				t.Errorf("apply with %d arguments: shadow %q, want 0", len(args), got)
			}
		}
	})
}

var deleteForms = []argForms{
	{0, "id", []string{"0", "1", "9007199254740991"}, append([]string{"00", "-1", "9007199254740992"}, notPlainIntegers...)},
	{1, "version", []string{"0", "7"}, append([]string{"-1", "00"}, notPlainIntegers...)},
	{2, "ttl", []string{"1", "604800", "31536000"}, append([]string{"0", "-1", "31536001"}, notPlainIntegers...)},
}

func TestDeleteArgumentFormats(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		ctx := context.Background()
		valid := []any{"1", "1", "604800"}
		i := 0
		for _, f := range deleteForms {
			for _, v := range f.accepted {
				i++
				name := fmt.Sprintf("ok%d", i)
				s.apply(t, cfg(name, 1, 1, 1, "svc"), false)
				args := append([]any(nil), valid...)
				args[f.arg] = v
				want := int64(1)
				if f.name == "id" && v == "0" {
					want = 0 // id 0 spares a hash with an id
				}
				if out, err := redisscript.DeleteRaw(ctx, s.rdb, s.ks, name, args...); err != nil || out != want {
					t.Errorf("%s %q: %v %v, want %d", f.name, v, out, err, want)
				}
			}
			for _, v := range f.rejected {
				i++
				name := fmt.Sprintf("bad%d", i)
				s.apply(t, cfg(name, 1, 1, 1, "svc"), false)
				args := append([]any(nil), valid...)
				args[f.arg] = v
				out, err := redisscript.DeleteRaw(ctx, s.rdb, s.ks, name, args...)
				if err == nil || !strings.Contains(err.Error(), "sluice delete: invalid "+f.name) {
					t.Errorf("%s %q: got %v, %v; want an invalid %s error", f.name, v, out, err, f.name)
				}
				if n, _ := s.rdb.Exists(ctx, s.ks.Bucket(name)).Result(); n != 1 {
					t.Errorf("%s %q: a refused delete removed the bucket", f.name, v)
				}
				if n, _ := s.rdb.Exists(ctx, s.ks.Tombstone(name)).Result(); n != 0 {
					t.Errorf("%s %q: a refused delete wrote a tombstone", f.name, v)
				}
			}
		}
	})
}

// TestAcquireNFormats: n is a plain decimal integer 1..1e9, as the doc says.
func TestAcquireNFormats(t *testing.T) {
	each(t, func(t *testing.T, s server) {
		s.apply(t, cfg("n", redisscript.MaxCapacity, redisscript.MaxPermitsMicro, 1, "svc"), false)
		for _, n := range []string{"1", "7", "1000", "1000000000"} {
			a, err := redisscript.AcquireRaw(context.Background(), s.rdb, s.ks, "n", "svc", n)
			if err != nil || (a.Code != redisscript.Allowed && a.Code != redisscript.Denied) {
				t.Errorf("n %q refused: %+v %v", n, a, err)
			}
		}
		for _, n := range append([]string{"0", "-1", "1000000001", "10000000000", "99999999999999999999"}, notPlainIntegers...) {
			a, err := redisscript.AcquireRaw(context.Background(), s.rdb, s.ks, "n", "svc", n)
			if err != nil || a != (redisscript.Answer{Code: redisscript.InvalidN}) {
				t.Errorf("n %q: got %+v %v, want invalid n", n, a, err)
			}
		}
	})
}
