// Package signin decides whether a sign-in attempt may check a password.
//
// Only failures count. Each attempt is counted as a failure when it
// begins (Begin), so that attempts sent in parallel cannot outrun the
// limit, and handed back when the password was right (Succeeded). Limits
// hold per client address and per user name; a device that signed in as
// the user before (it holds a device token from Succeeded, kept by the
// console in a cookie) is counted on its own instead of on the user name,
// so that someone guessing at a user's password cannot lock the user out
// of the browsers they use. Admins can clear a lock (Clear).
//
// The counters live in MySQL, shared by every console instance, as the
// time up to which a subject's allowance is spent (generic cell rate
// algorithm): a limit of N failures per window W refills one failure every
// W/N, and refuses once N are spent.
package signin

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/database"
	"github.com/sluicehq/sluice/internal/errs"
	"github.com/sluicehq/sluice/internal/secrets"
)

// Limit allows Failures failed attempts per Window, refilling one every
// Window/Failures.
type Limit struct {
	Failures int
	Window   time.Duration
}

func (l Limit) interval() time.Duration { return l.Window / time.Duration(l.Failures) }

func (l Limit) valid() bool { return l.Failures > 0 && l.Window >= time.Duration(l.Failures) }

// Policy is the set of limits. See DefaultPolicy for the reasons of each.
type Policy struct {
	// User limits failures per user name, from unknown devices.
	User Limit
	// Addr limits failures per client address, whoever signs in.
	Addr Limit
	// Device limits failures per known device; a known device is not
	// held by the user name's limit.
	Device Limit
	// DeviceLifetime is how long a device stays known after its last
	// successful sign-in.
	DeviceLifetime time.Duration
	// MaxDevices bounds the known devices kept per user; the least
	// recently used go first.
	MaxDevices int
}

// DefaultPolicy:
//   - per user name, 5 failures per 5 minutes (one more a minute): a
//     password guesser gets about 1,400 guesses a day per name;
//   - per client address, 30 failures per 10 minutes (three more a
//     minute): an office of a few hundred people behind one NAT address
//     mistypes a few passwords in a quarter of an hour, not thirty, and
//     successful sign-ins do not count at all;
//   - per known device, 5 failures per 5 minutes, as per user name;
//   - a device stays known for 90 days after its last sign-in, at most
//     20 per user.
var DefaultPolicy = Policy{
	User:           Limit{Failures: 5, Window: 5 * time.Minute},
	Addr:           Limit{Failures: 30, Window: 10 * time.Minute},
	Device:         Limit{Failures: 5, Window: 5 * time.Minute},
	DeviceLifetime: 90 * 24 * time.Hour,
	MaxDevices:     20,
}

// Scopes of the counters.
const (
	scopeAddr   = "addr"
	scopeUser   = "user"
	scopeDevice = "device"
)

// Throttle applies a Policy. It is safe for concurrent use; set its fields
// before the first call.
type Throttle struct {
	db *sqlx.DB
	// Policy is DefaultPolicy unless changed.
	Policy Policy
	// Now is the clock; tests move it.
	Now func() time.Time
}

// New returns a Throttle on db, a pool on a migrated database, with
// DefaultPolicy.
func New(db *sqlx.DB) *Throttle { return &Throttle{db: db, Policy: DefaultPolicy, Now: time.Now} }

func (t *Throttle) now() time.Time { return t.Now().UTC().Truncate(time.Microsecond) }

// Attempt is one sign-in attempt.
type Attempt struct {
	// User is the user name typed; case and surrounding space do not
	// matter, as at sign-in.
	User string
	// Addr is the client address.
	Addr string
	// Device is the device token the browser presented ("" for none).
	Device string
}

// Decision says whether an attempt may check its password.
type Decision struct {
	Allowed bool
	// RetryAfter is, when refused, how long until an attempt may be
	// allowed again.
	RetryAfter time.Duration
	// KnownDevice says the attempt came from a device that signed in as
	// the user before: it was counted on the device, not on the user.
	KnownDevice bool
	// Reason says which limit refused: "address", "user" or "device".
	Reason string
}

// counter is one subject's limit.
type counter struct {
	scope, subject string
	limit          Limit
	reason         string
}

func normalize(user string) string { return strings.ToLower(strings.TrimSpace(user)) }

// subject is the stored form of a name or address: its SHA-256, which keeps
// odd input out of the table and the table free of addresses.
func subject(scope, key string) string {
	sum := sha256.Sum256([]byte(scope + "\x00" + key))
	return hex.EncodeToString(sum[:])
}

// counters returns the limits an attempt counts against, the address's
// first (always locked in that order, so attempts never deadlock).
func (t *Throttle) counters(a Attempt, device string) []counter {
	cs := []counter{{scopeAddr, subject(scopeAddr, a.Addr), t.Policy.Addr, "address"}}
	if device != "" {
		return append(cs, counter{scopeDevice, subject(scopeDevice, device), t.Policy.Device, "device"})
	}
	return append(cs, counter{scopeUser, subject(scopeUser, normalize(a.User)), t.Policy.User, "user"})
}

// maxTokenLen bounds what is hashed of a presented device token.
const maxTokenLen = 128

// knownDevice returns the id of the device token if it belongs to user and
// has not expired, else "".
func (t *Throttle) knownDevice(ctx context.Context, q sqlx.QueryerContext, a Attempt) (string, error) {
	if a.Device == "" || len(a.Device) > maxTokenLen {
		return "", nil
	}
	id := secrets.Digest(a.Device)
	var user string
	err := sqlx.GetContext(ctx, q, &user, `SELECT username FROM signin_devices WHERE id = ? AND expires_at > ?`, id, t.now())
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read sign-in device: %w", database.Translate(err))
	}
	if user != normalize(a.User) {
		return "", nil
	}
	return id, nil
}

// errRefused rolls back the transaction of a refused attempt.
var errRefused = errors.New("refused")

// Begin decides whether attempt a may check its password. An allowed
// attempt is counted as a failure at once; call Succeeded when the
// password was right. A refused attempt counts nothing.
func (t *Throttle) Begin(ctx context.Context, a Attempt) (Decision, error) {
	if err := t.check(); err != nil {
		return Decision{}, err
	}
	device, err := t.knownDevice(ctx, t.db, a)
	if err != nil {
		return Decision{}, err
	}
	d := Decision{KnownDevice: device != ""}
	now := t.now()
	err = database.InTx(ctx, t.db, func(tx *database.Tx) error {
		cs := t.counters(a, device)
		tats := make([]time.Time, len(cs))
		for i, c := range cs {
			tat, err := lockCounter(ctx, tx, c, now)
			if err != nil {
				return err
			}
			tats[i] = tat
		}
		for i, c := range cs {
			if wait := tats[i].Sub(now) - (c.limit.Window - c.limit.interval()); wait > 0 {
				if wait > d.RetryAfter {
					d.RetryAfter, d.Reason = wait, c.reason
				}
			}
		}
		if d.RetryAfter > 0 {
			return errRefused
		}
		for i, c := range cs {
			if err := setCounter(ctx, tx, c, later(tats[i], now).Add(c.limit.interval())); err != nil {
				return err
			}
		}
		return nil
	})
	if errors.Is(err, errRefused) {
		return d, nil
	}
	if err != nil {
		return Decision{}, err
	}
	d.Allowed = true
	return d, nil
}

// Succeeded hands back the failure Begin counted for a, whose password was
// right, and remembers the device: it returns the device token the browser
// should keep (the one it presented, or a new one).
func (t *Throttle) Succeeded(ctx context.Context, a Attempt) (string, error) {
	if err := t.check(); err != nil {
		return "", err
	}
	user := normalize(a.User)
	if user == "" {
		return "", errs.Invalid("user", "is required")
	}
	now := t.now()
	token := ""
	err := database.InTx(ctx, t.db, func(tx *database.Tx) error {
		device, err := t.knownDevice(ctx, tx, a)
		if err != nil {
			return err
		}
		for _, c := range t.counters(a, device) {
			tat, err := lockCounter(ctx, tx, c, now)
			if err != nil {
				return err
			}
			if err := setCounter(ctx, tx, c, later(tat.Add(-c.limit.interval()), now)); err != nil {
				return err
			}
		}
		expires := now.Add(t.Policy.DeviceLifetime)
		if device != "" {
			token = a.Device
			_, err := tx.ExecContext(ctx, `UPDATE signin_devices SET last_used_at = ?, expires_at = ? WHERE id = ?`, now, expires, device)
			if err != nil {
				return fmt.Errorf("touch sign-in device: %w", database.Translate(err))
			}
			return nil
		}
		if token, err = secrets.New(); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO signin_devices (id, username, created_at, last_used_at, expires_at)
			VALUES (?, ?, ?, ?, ?)`, secrets.Digest(token), user, now, now, expires); err != nil {
			return fmt.Errorf("remember sign-in device: %w", database.Translate(err))
		}
		return t.trimDevices(ctx, tx, user)
	})
	if err != nil {
		return "", err
	}
	return token, nil
}

// trimDevices forgets the least recently used devices of user beyond
// MaxDevices.
func (t *Throttle) trimDevices(ctx context.Context, tx *database.Tx, user string) error {
	var ids []string
	if err := tx.SelectContext(ctx, &ids, `SELECT id FROM signin_devices WHERE username = ?
		ORDER BY last_used_at DESC, id`, user); err != nil {
		return fmt.Errorf("list sign-in devices: %w", database.Translate(err))
	}
	if len(ids) <= t.Policy.MaxDevices {
		return nil
	}
	q, args, err := sqlx.In(`DELETE FROM signin_devices WHERE id IN (?)`, ids[t.Policy.MaxDevices:])
	if err != nil {
		return fmt.Errorf("forget sign-in devices: %w", err)
	}
	if _, err := tx.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("forget sign-in devices: %w", database.Translate(err))
	}
	return nil
}

// Locked reports how long the user name stays locked for attempts from
// unknown devices; 0 means it is not locked.
func (t *Throttle) Locked(ctx context.Context, user string) (time.Duration, error) {
	if err := t.check(); err != nil {
		return 0, err
	}
	c := t.counters(Attempt{User: user}, "")[1]
	var tat time.Time
	err := t.db.GetContext(ctx, &tat, `SELECT tat FROM signin_failures WHERE scope = ? AND subject = ?`, c.scope, c.subject)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read sign-in failures: %w", database.Translate(err))
	}
	return max(0, tat.Sub(t.now())-(c.limit.Window-c.limit.interval())), nil
}

// Clear forgets the failed attempts counted on the user name and on the
// user's known devices, which ends a lock at once. It is audited
// ("user.unlock") as done by actor, an admin.
func (t *Throttle) Clear(ctx context.Context, actor audit.Actor, user string) error {
	return t.clear(ctx, actor, "user", normalize(user), func(tx *database.Tx) (int64, error) {
		n, err := deleteCounters(ctx, tx, `scope = ? AND subject = ?`, scopeUser, subject(scopeUser, normalize(user)))
		if err != nil {
			return 0, err
		}
		var ids []string
		if err := tx.SelectContext(ctx, &ids, `SELECT id FROM signin_devices WHERE username = ?`, normalize(user)); err != nil {
			return 0, fmt.Errorf("list sign-in devices: %w", database.Translate(err))
		}
		for _, id := range ids {
			m, err := deleteCounters(ctx, tx, `scope = ? AND subject = ?`, scopeDevice, subject(scopeDevice, id))
			if err != nil {
				return 0, err
			}
			n += m
		}
		return n, nil
	})
}

// ClearAddress forgets the failed attempts counted on a client address.
// It is audited ("address.unlock").
func (t *Throttle) ClearAddress(ctx context.Context, actor audit.Actor, addr string) error {
	return t.clear(ctx, actor, "address", addr, func(tx *database.Tx) (int64, error) {
		return deleteCounters(ctx, tx, `scope = ? AND subject = ?`, scopeAddr, subject(scopeAddr, addr))
	})
}

func (t *Throttle) clear(ctx context.Context, actor audit.Actor, kind, name string, del func(*database.Tx) (int64, error)) error {
	if strings.TrimSpace(name) == "" {
		return errs.Invalid(kind, "is required")
	}
	return database.InTx(ctx, t.db, func(tx *database.Tx) error {
		n, err := del(tx)
		if err != nil {
			return err
		}
		return audit.Write(ctx, tx, actor, audit.Entry{
			Action: kind + ".unlock", ObjectType: kind, ObjectName: strings.ToValidUTF8(name, "\uFFFD"),
			Detail: fmt.Sprintf("sign-in failures forgotten (%d counters)", n),
		})
	})
}

// Purge deletes counters whose allowance is whole again and devices no
// longer known, and returns how many rows went. Run it now and then.
func (t *Throttle) Purge(ctx context.Context) (int64, error) {
	now := t.now()
	n, err := deleteCounters(ctx, t.db, `tat <= ?`, now)
	if err != nil {
		return n, err
	}
	m, err := database.ExecCount(ctx, t.db, `DELETE FROM signin_devices WHERE expires_at <= ?`, now)
	if err != nil {
		return n, fmt.Errorf("purge sign-in devices: %w", err)
	}
	return n + m, nil
}

// check refuses a policy that cannot work, rather than dividing by zero.
func (t *Throttle) check() error {
	p := t.Policy
	if !p.User.valid() || !p.Addr.valid() || !p.Device.valid() || p.DeviceLifetime <= 0 || p.MaxDevices <= 0 {
		return fmt.Errorf("sign-in throttle: invalid policy %+v", p)
	}
	return nil
}

// lockCounter takes the row lock of c's counter, creating it if needed,
// and returns the time its allowance is spent up to.
func lockCounter(ctx context.Context, tx *database.Tx, c counter, now time.Time) (time.Time, error) {
	// The upsert takes the row's exclusive lock at once, new row or not;
	// a plain insert-if-missing would take a shared lock first, and two
	// attempts upgrading theirs would deadlock.
	if _, err := tx.ExecContext(ctx, `INSERT INTO signin_failures (scope, subject, tat) VALUES (?, ?, ?)
		ON DUPLICATE KEY UPDATE tat = tat`, c.scope, c.subject, now); err != nil {
		return time.Time{}, fmt.Errorf("count sign-in failure: %w", database.Translate(err))
	}
	var tat time.Time
	if err := tx.GetContext(ctx, &tat, `SELECT tat FROM signin_failures WHERE scope = ? AND subject = ? FOR UPDATE`,
		c.scope, c.subject); err != nil {
		return time.Time{}, fmt.Errorf("count sign-in failure: %w", database.Translate(err))
	}
	return tat, nil
}

func setCounter(ctx context.Context, tx *database.Tx, c counter, tat time.Time) error {
	if _, err := tx.ExecContext(ctx, `UPDATE signin_failures SET tat = ? WHERE scope = ? AND subject = ?`,
		tat, c.scope, c.subject); err != nil {
		return fmt.Errorf("count sign-in failure: %w", database.Translate(err))
	}
	return nil
}

func deleteCounters(ctx context.Context, ex sqlx.ExecerContext, where string, args ...any) (int64, error) {
	n, err := database.ExecCount(ctx, ex, `DELETE FROM signin_failures WHERE `+where, args...)
	if err != nil {
		return 0, fmt.Errorf("clear sign-in failures: %w", err)
	}
	return n, nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
