package memlimit

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/redisscript/slots"
)

// maxSlotLease is the longest slot lease time, as in Redis.
const maxSlotLease = 24 * time.Hour

var _ client.SlotTaker = (*Limiter)(nil)

// TakeSlot takes a slot of concurrency limit limit, with
// client.Limiter.TakeSlot's results and errors: the slot expires the
// limit's SlotLease after it was taken or last renewed, on the Limiter's
// clock.
func (l *Limiter) TakeSlot(ctx context.Context, limit string) (*client.Slot, error) {
	return l.observeSlot(limit, "")(l.takeSlot(ctx, limit, "", false))
}

// TakeSlotKey takes a slot of key of keyed concurrency limit limit, with
// client.Limiter.TakeSlotKey's results and errors.
func (l *Limiter) TakeSlotKey(ctx context.Context, limit, key string) (*client.Slot, error) {
	if len(key) < 1 || len(key) > maxKey {
		return l.observeSlot(limit, key)(&client.Slot{}, client.ErrInvalidKey)
	}
	return l.observeSlot(limit, key)(l.takeSlot(ctx, limit, key, true))
}

// observeSlot returns what tells a take to the observer, as
// client.Limiter does (client.Decision.Slot), and passes its answer on.
func (l *Limiter) observeSlot(limit, key string) func(*client.Slot, error) (*client.Slot, error) {
	return func(s *client.Slot, err error) (*client.Slot, error) {
		if l.observe != nil {
			l.observe(client.Decision{Bucket: limit, Key: key, N: 1, Result: s.SlotResult.Result(), Err: err, Slot: true})
		}
		return s, err
	}
}

// InUse returns the slots held now of concurrency limit name (of key of
// a keyed one), and false for an unknown limit or one of another kind.
func (l *Limiter) InUse(name, key string) (int64, bool) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[name]
	if b == nil || b.def.SlotLease == 0 || b.def.Keyed != (key != "") {
		return 0, false
	}
	set := b.slotSet(key, false)
	if set == nil {
		return 0, true
	}
	return set.InUse(now), true
}

func (l *Limiter) takeSlot(ctx context.Context, name, key string, keyed bool) (*client.Slot, error) {
	if err := ctx.Err(); err != nil {
		return &client.Slot{}, err
	}
	id := slots.NewID()
	res, err := l.slotOp(name, key, keyed, slots.Take, id)
	if err != nil {
		return &client.Slot{SlotResult: res}, err
	}
	op := func(op slots.Op) func(context.Context) (client.SlotResult, error) {
		return func(ctx context.Context) (client.SlotResult, error) {
			if err := ctx.Err(); err != nil {
				return client.SlotResult{}, err
			}
			return l.slotOp(name, key, keyed, op, id)
		}
	}
	return client.NewSlot(res, id, op(slots.Release), op(slots.Renew)), nil
}

// slotOp runs op on slot id of limit name (of key, when keyed), as the
// slot script does.
func (l *Limiter) slotOp(name, key string, keyed bool, op slots.Op, id string) (client.SlotResult, error) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b, capacity, err := l.lookup(name, keyed, 1)
	if err != nil {
		return client.SlotResult{Limit: capacity}, err
	}
	if b.def.SlotLease == 0 {
		return client.SlotResult{Limit: b.def.Capacity}, client.ErrWrongKind
	}
	lim := b.lim
	if keyed {
		lim = b.keyLimit(key)
	}
	set := b.slotSet(key, true)
	a := set.Do(op, id, now, lim.Capacity, b.def.SlotLease.Microseconds(), lim.shadow)
	if keyed && set.Empty(now) {
		delete(b.keySlots, key) // an idle key costs nothing, as in Redis
	}
	return client.SlotResult{Allowed: a.Code != slots.Denied, WouldDeny: a.Code == slots.WouldDeny, InUse: a.InUse,
		Limit: lim.Capacity, RetryAfter: micros(a.RetryMicros), Lease: b.def.SlotLease}, nil
}

// slotSet is the slot set of the limit, or of key of a keyed limit
// (created when add). l.mu must be held.
func (b *bucket) slotSet(key string, add bool) *slots.Set {
	if !b.def.Keyed {
		return &b.slots
	}
	set := b.keySlots[key]
	if set == nil && add {
		set = &slots.Set{}
		b.keySlots[key] = set
	}
	return set
}
