package signin_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/signin"
	"github.com/sluicehq/sluice/internal/testenv"
)

var (
	ctx  = context.Background()
	boss = audit.Actor{User: "root", Via: "console", Addr: "192.0.2.1"}
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func setup(t *testing.T) (*sqlx.DB, *signin.Throttle, *clock) {
	t.Helper()
	db := testenv.MySQL(t)
	th := signin.New(db)
	c := &clock{t: time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC)}
	th.Now = c.Now
	return db, th, c
}

func begin(t *testing.T, th *signin.Throttle, a signin.Attempt) signin.Decision {
	t.Helper()
	d, err := th.Begin(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// signIn is a correct sign-in: Begin, then Succeeded. It returns the
// device token, or "" when refused.
func signIn(t *testing.T, th *signin.Throttle, a signin.Attempt) string {
	t.Helper()
	if !begin(t, th, a).Allowed {
		return ""
	}
	token, err := th.Succeeded(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// TestOfficeBehindOneAddress: colleagues behind one NAT address sign in
// all morning, mistyping now and then; nobody is locked out. The old rule
// (successes counted, 5 per 5 minutes per address) locked out the sixth.
func TestOfficeBehindOneAddress(t *testing.T) {
	_, th, c := setup(t)
	const office = "203.0.113.10"
	for i := range 200 {
		a := signin.Attempt{User: fmt.Sprintf("user%d", i), Addr: office}
		if i%10 == 0 { // one in ten mistypes once first
			if !begin(t, th, a).Allowed {
				t.Fatalf("user%d's mistyped attempt refused", i)
			}
		}
		if signIn(t, th, a) == "" {
			t.Fatalf("user%d refused after %d colleagues signed in", i, i)
		}
		c.Add(5 * time.Second)
	}
}

// TestFailuresLockUserAndAddress: five failures lock a user name (one
// more a minute); thirty lock an address, whatever names are tried.
func TestFailuresLockUserAndAddress(t *testing.T) {
	_, th, c := setup(t)
	a := signin.Attempt{User: "Alice ", Addr: "198.51.100.1"}
	for i := range 5 {
		if !begin(t, th, a).Allowed {
			t.Fatalf("failure %d refused", i+1)
		}
	}
	d := begin(t, th, signin.Attempt{User: "alice", Addr: "198.51.100.2"})
	if d.Allowed || d.Reason != "user" || d.RetryAfter <= 0 || d.RetryAfter > time.Minute {
		t.Fatalf("sixth failure on the name = %+v, want refused for at most a minute", d)
	}
	if wait, err := th.Locked(ctx, "ALICE"); err != nil || wait != d.RetryAfter {
		t.Fatalf("Locked = %v, %v; want %v", wait, err, d.RetryAfter)
	}
	c.Add(time.Minute)
	if !begin(t, th, a).Allowed || begin(t, th, a).Allowed {
		t.Fatal("after a minute, exactly one more attempt should be allowed")
	}

	// The address: 30 failures over 30 names, then even a new name waits.
	const addr = "198.51.100.50"
	for i := range 30 {
		if !begin(t, th, signin.Attempt{User: fmt.Sprintf("guess%d", i), Addr: addr}).Allowed {
			t.Fatalf("address failure %d refused", i+1)
		}
	}
	if d := begin(t, th, signin.Attempt{User: "newname", Addr: addr}); d.Allowed || d.Reason != "address" {
		t.Fatalf("31st failure from one address = %+v", d)
	}
}

// TestParallelAttempts: attempts sent at once cannot outrun the limit,
// because each is counted when it begins.
func TestParallelAttempts(t *testing.T) {
	_, th, _ := setup(t)
	var allowed atomic.Int32
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			d, err := th.Begin(ctx, signin.Attempt{User: "root", Addr: fmt.Sprintf("192.0.2.%d", i)})
			if err != nil {
				t.Error(err)
				return
			}
			if d.Allowed {
				allowed.Add(1)
			}
		})
	}
	wg.Wait()
	if n := allowed.Load(); n != 5 {
		t.Fatalf("%d of 20 parallel attempts allowed, want 5", n)
	}
}

// TestKnownDevicePassesUserLock: someone guessing at admin's password
// from elsewhere locks the name, yet admin signs in from the browser they
// used before. A device token of another user does not help, and failures
// from the known device are limited on the device.
func TestKnownDevicePassesUserLock(t *testing.T) {
	_, th, c := setup(t)
	mine := signin.Attempt{User: "admin", Addr: "192.0.2.20"}
	token := signIn(t, th, mine)
	if token == "" {
		t.Fatal("first sign-in refused")
	}
	mine.Device = token
	other := signIn(t, th, signin.Attempt{User: "bob", Addr: "192.0.2.21"})

	// One wrong guess a minute, for an hour, from addresses that change.
	for i := range 60 {
		begin(t, th, signin.Attempt{User: "admin", Addr: fmt.Sprintf("198.51.100.%d", i)})
		c.Add(20 * time.Second)
		begin(t, th, signin.Attempt{User: "admin", Addr: fmt.Sprintf("198.51.101.%d", i)})
		begin(t, th, signin.Attempt{User: "admin", Addr: fmt.Sprintf("198.51.102.%d", i)})
		c.Add(40 * time.Second)
	}
	// The guesser takes each attempt the name regains as soon as it can.
	begin(t, th, signin.Attempt{User: "admin", Addr: "198.51.103.1"})
	if d := begin(t, th, signin.Attempt{User: "admin", Addr: "192.0.2.20"}); d.Allowed {
		t.Fatal("test premise: the name is not locked")
	}
	if d := begin(t, th, signin.Attempt{User: "admin", Addr: "192.0.2.20", Device: other}); d.Allowed || d.KnownDevice {
		t.Fatalf("bob's device token let an attempt on admin through: %+v", d)
	}
	d := begin(t, th, mine)
	if !d.Allowed || !d.KnownDevice {
		t.Fatalf("admin's own browser refused: %+v", d)
	}
	again, err := th.Succeeded(ctx, mine)
	if err != nil || again != token {
		t.Fatalf("Succeeded on a known device = %q, %v; want the same token", again, err)
	}

	// A stolen device token still gets few guesses.
	for i := range 5 {
		if !begin(t, th, mine).Allowed {
			t.Fatalf("device failure %d refused", i+1)
		}
	}
	if d := begin(t, th, mine); d.Allowed || d.Reason != "device" {
		t.Fatalf("sixth failure from the device = %+v", d)
	}

	// Devices are forgotten after their lifetime.
	c.Add(signin.DefaultPolicy.DeviceLifetime + time.Hour)
	if d := begin(t, th, mine); d.KnownDevice {
		t.Fatal("a device unused for longer than its lifetime is still known")
	}
}

// TestClear: an admin clears a user's lock, including the lock of the
// user's devices, and an address's; both are audited.
func TestClear(t *testing.T) {
	db, th, _ := setup(t)
	a := signin.Attempt{User: "carol", Addr: "192.0.2.30"}
	for range 6 {
		begin(t, th, a)
	}
	if wait, _ := th.Locked(ctx, "carol"); wait <= 0 {
		t.Fatal("test premise: carol is not locked")
	}
	if err := th.Clear(ctx, boss, " Carol"); err != nil {
		t.Fatal(err)
	}
	if wait, err := th.Locked(ctx, "carol"); err != nil || wait != 0 {
		t.Fatalf("Locked after Clear = %v, %v", wait, err)
	}
	if !begin(t, th, a).Allowed {
		t.Fatal("attempt refused after Clear")
	}
	page, err := audit.NewStore(db).List(ctx, audit.Filter{Action: "user.unlock"})
	if err != nil || len(page.Entries) != 1 || page.Entries[0].ObjectName != "carol" || page.Entries[0].Actor != "root" {
		t.Fatalf("unlock audit = %+v, %v", page, err)
	}
	const addr = "198.51.100.77"
	for i := range 31 {
		begin(t, th, signin.Attempt{User: fmt.Sprintf("u%d", i), Addr: addr})
	}
	must(t, th.ClearAddress(ctx, boss, addr))
	if !begin(t, th, signin.Attempt{User: "x", Addr: addr}).Allowed {
		t.Fatal("address still locked after ClearAddress")
	}
	if err := th.Clear(ctx, boss, " "); err == nil {
		t.Fatal("Clear of an empty name accepted")
	}
}

// TestPurge: spent-out counters and expired devices go; live ones stay.
func TestPurge(t *testing.T) {
	db, th, c := setup(t)
	signIn(t, th, signin.Attempt{User: "dave", Addr: "192.0.2.40"})
	begin(t, th, signin.Attempt{User: "erin", Addr: "192.0.2.41"})
	c.Add(time.Hour)
	begin(t, th, signin.Attempt{User: "fred", Addr: "192.0.2.42"})
	n, err := th.Purge(ctx)
	must(t, err)
	var left int
	must(t, db.GetContext(ctx, &left, `SELECT COUNT(*) FROM signin_failures`))
	if n != 4 || left != 2 {
		t.Fatalf("Purge removed %d rows and left %d counters; want 4 and 2", n, left)
	}
	var devices int
	must(t, db.GetContext(ctx, &devices, `SELECT COUNT(*) FROM signin_devices`))
	if devices != 1 {
		t.Fatalf("%d devices after purge, want dave's", devices)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
