package client

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redisscript"
)

// The token calls run as Redis functions where they can (Redis 7 and
// later, over a *redis.Client): FCALL runs the loaded library's function,
// whereas EVALSHA runs the whole script chunk on every call, making the
// Lua core's local functions anew each time. The answer is the same. New
// loads the library in the background; until it is loaded, and for good
// where it cannot be (an older Redis, an ACL without FUNCTION, Cluster and
// Ring clients), calls use EVALSHA. A Redis that lost the library
// (restarted without persistence, FUNCTION FLUSH) answers FCALL with
// errFunctionMissing: the call is resent as EVAL, as after NOSCRIPT, and
// the library is loaded again in the background.

// Function states. fnLoading is the zero value: New starts with a load.
const (
	// fnLoading: a load is in flight; calls use EVALSHA.
	fnLoading int32 = iota
	// fnOn: the library is loaded; calls use FCALL.
	fnOn
	// fnRetry: the last load got no answer (a timeout, a network error);
	// the next plain acquire Redis answers starts another.
	fnRetry
	// fnOff: functions cannot be used; calls use EVALSHA for good.
	fnOff
)

// maxFunctionLoads is how many loads in a row may go unanswered before
// the Limiter keeps EVALSHA for good.
const maxFunctionLoads = 3

// errFunctionMissing starts the reply of Redis to an FCALL of a function
// it does not have ("ERR Function not found"; go-redis's HasErrorPrefix
// drops the "ERR ").
const errFunctionMissing = "Function not found"

// The commands' names, made into interface values once so that a call
// sending them allocates nothing.
var (
	fcallArg   any = "fcall"
	evalshaArg any = "evalsha"
)

// script is a token script as a Limiter sends it: its SHA1 for EVALSHA,
// its function's name for FCALL and its source for EVAL, made into
// interface values once.
type script struct{ sha, fn, src any }

func scriptOf(s redisscript.Script) *script {
	return &script{sha: s.SHA(), fn: redisscript.Functions.Function(s), src: s.Source()}
}

// The token scripts, all in the library redisscript.Functions.
var (
	acquireScript   = scriptOf(redisscript.AcquireScript)
	keyedScript     = scriptOf(redisscript.KeyedAcquireScript)
	allScript       = scriptOf(redisscript.AcquireAllScript)
	adjustScript    = scriptOf(redisscript.AdjustScript)
	leaseScript     = scriptOf(redisscript.LeaseScript)
	slotScript      = scriptOf(redisscript.SlotScript)
	keyedSlotScript = scriptOf(redisscript.KeyedSlotScript)
)

// head returns the command and its first argument for a call of s when
// the library is in state: FCALL of its function where it is loaded, else
// EVALSHA of its SHA1. Either answers the same.
func (s *script) head(state int32) (any, any) {
	if state == fnOn {
		return fcallArg, s.fn
	}
	return evalshaArg, s.sha
}

// head is s.head in the Limiter's present state.
func (l *Limiter) head(s *script) (any, any) { return s.head(l.fn.state.Load()) }

// notRun reports whether err says that a call did not run, so that it may
// be sent once more with the script's source: NOSCRIPT, or "Function not
// found", which also starts a load of the library.
func (l *Limiter) notRun(err error) bool {
	switch {
	case redis.HasErrorPrefix(err, "NOSCRIPT"):
		return true
	case redis.HasErrorPrefix(err, errFunctionMissing):
		l.functionMissing()
		return true
	}
	return false
}

// functions is a Limiter's use of the function library.
type functions struct {
	state atomic.Int32
	// unanswered counts the loads in a row that got no answer.
	unanswered atomic.Int32
	// mu guards closed and wg.Add, so that Close's Wait never races a
	// load starting.
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// startFunctions starts the first load of the function library, over a
// *redis.Client only: a Cluster or Ring client keeps EVALSHA (a library
// would have to be loaded on every node, and again on each new one).
func (l *Limiter) startFunctions() {
	if _, ok := l.rdb.(*redis.Client); !ok {
		l.fn.state.Store(fnOff)
		return
	}
	l.fn.state.Store(fnLoading)
	l.loadFunction()
}

// functionMissing is called when Redis answered an FCALL that it has no
// such function: acquires go back to EVALSHA, and one load starts.
func (l *Limiter) functionMissing() {
	if l.fn.state.CompareAndSwap(fnOn, fnLoading) {
		l.loadFunction()
	}
}

// retryFunction starts another load after one that got no answer, once
// Redis answered an acquire.
func (l *Limiter) retryFunction() {
	if l.fn.state.CompareAndSwap(fnRetry, fnLoading) {
		l.loadFunction()
	}
}

// loadFunction loads the library in the background; the caller moved the
// state to fnLoading, so there is one load at a time. The load is bounded
// by the Limiter's timeout; Close waits for it.
func (l *Limiter) loadFunction() {
	l.fn.mu.Lock()
	if l.fn.closed {
		l.fn.mu.Unlock()
		return
	}
	l.fn.wg.Add(1)
	l.fn.mu.Unlock()
	go func() {
		defer l.fn.wg.Done()
		ctx, cancel := context.WithTimeout(l.ctx, l.opt.timeout)
		defer cancel()
		// Through the sender's client, whose read and write timeouts are
		// the Limiter's.
		err := redisscript.LoadFunctions(ctx, l.snd.rdb)
		l.fn.state.Store(l.functionLoaded(err))
	}()
}

// functionLoaded returns the state after a load that ended with err.
func (l *Limiter) functionLoaded(err error) int32 {
	var rerr redis.Error
	switch {
	case err == nil:
		l.fn.unanswered.Store(0)
		return fnOn
	case errors.As(err, &rerr) && !unavailable(err) || redis.HasErrorPrefix(err, "OOM"):
		// Redis refused: an unknown command (before Redis 7), no
		// permission, no memory for it.
		l.opt.log.Debug("sluice: redis functions unavailable, token calls run as scripts", "err", err)
		return fnOff
	case l.fn.unanswered.Add(1) >= maxFunctionLoads || l.closed.Load():
		l.opt.log.Debug("sluice: loading the function library got no answer, token calls run as scripts", "err", err)
		return fnOff
	}
	return fnRetry
}

// close stops new loads and waits for the one in flight, which ends
// within the Limiter's timeout.
func (f *functions) close() {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	f.wg.Wait()
}
