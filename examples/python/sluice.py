"""A reference client of Sluice for Python, on redis-py.

It takes tokens exactly as docs/protocol.md describes: one EVALSHA of the
acquire script per call, resent once with EVAL after NOSCRIPT and never
after any other error, with the seven-integer answer mapped to a Result or
a typed error. It has no batching, usage counting or failure policy: a
Redis error or timeout reaches the caller, who decides (fail open, closed,
or a local bucket).

    import redis, sluice
    limiter = sluice.Limiter(redis.Redis(), "checkout")
    try:
        res = limiter.acquire("orders-api", 1)
    except sluice.UnknownBucket:
        ...
    if not res.allowed:
        time.sleep(res.retry_after)

A request marked critical (acquire(bucket, n, critical=True)) may take the
bucket's reserve, which every other request leaves.
"""

import base64
import hashlib
import os
import re
from dataclasses import dataclass

import redis

# The default key prefix; every reader and writer of one deployment uses the same.
DEFAULT_PREFIX = "sluice:"

# The acquire script, at its path in the repository.
ACQUIRE_LUA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "internal", "redisscript", "acquire.lua")
# The slot script of concurrency limits, beside it.
SLOT_LUA = os.path.join(os.path.dirname(ACQUIRE_LUA), "slot.lua")

# Names of buckets and apps: ^[a-z0-9][a-z0-9._-]{0,62}$.
_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}")

# Codes of the acquire answer.
ALLOWED = 1
DENIED = 0
# A bucket in shadow mode would have denied: the caller is allowed and
# nothing was taken.
WOULD_DENY = 2
UNKNOWN_BUCKET = -1
APP_NOT_ALLOWED = -2
EXCEEDS_CAPACITY = -3
INVALID_N = -4
# Slot calls: the limit is not a concurrency limit.
WRONG_KIND = -6


class SluiceError(Exception):
    """Base of the errors of an acquire that Redis answered."""


class UnknownBucket(SluiceError):
    """No bucket of that name exists in Redis."""


class AppNotAllowed(SluiceError):
    """The app is not an allowed app of the bucket. limit is its capacity."""

    def __init__(self, message, limit=0):
        super().__init__(message)
        self.limit = limit


class ExceedsCapacity(SluiceError):
    """n is larger than the bucket's capacity: it can never be granted."""

    def __init__(self, message, limit=0):
        super().__init__(message)
        self.limit = limit


class InvalidN(SluiceError, ValueError):
    """n is not a whole number from 1 to 1000000000."""


class WrongKind(SluiceError):
    """The limit is not of the kind the call needs (a slot of a token bucket)."""


class WrongType(SluiceError):
    """The bucket's key holds another Redis type (a clash of key prefixes).

    The script failed before writing anything. It is an error of this key
    alone, not a Redis outage.
    """


class ProtocolError(SluiceError):
    """The script answered something that is not a valid acquire answer."""


def valid_name(s):
    """Reports whether s is a valid bucket or app name."""
    return isinstance(s, str) and _NAME.fullmatch(s) is not None


def bucket_key(bucket, prefix=DEFAULT_PREFIX):
    """The key of a bucket's hash: <prefix>{<bucket>}."""
    return prefix + "{" + bucket + "}"


def slots_key(limit, prefix=DEFAULT_PREFIX):
    """The key of a concurrency limit's slot set: <prefix>{<limit>}:slots."""
    return bucket_key(limit, prefix) + ":slots"


class Script:
    """A Lua script run by EVALSHA, and resent by EVAL after NOSCRIPT."""

    def __init__(self, source):
        self.source = source
        self.sha = hashlib.sha1(source.encode("utf-8")).hexdigest()
        # How many calls met NOSCRIPT and were resent with the source.
        self.reloads = 0

    @classmethod
    def load(cls, *paths):
        """The script whose source is the files at paths, one after the other."""
        source = ""
        for path in paths:
            with open(path, encoding="utf-8") as f:
                source += f.read()
        return cls(source)

    def run(self, r, keys, args):
        try:
            return r.evalsha(self.sha, len(keys), *keys, *args)
        except redis.exceptions.NoScriptError:
            # The script did not run (the cache is empty after a restart or
            # a failover), so sending it again cannot take tokens twice. No
            # other error is resent: Redis may have run the script.
            self.reloads += 1
            return r.eval(self.source, len(keys), *keys, *args)


@dataclass(frozen=True)
class Answer:
    """The seven integers of the acquire script's answer."""

    code: int
    remaining: int
    retry_us: int
    reset_us: int
    capacity: int
    permits_micro: int
    period: int

    @classmethod
    def from_reply(cls, reply):
        if (not isinstance(reply, list) or len(reply) != 7 or not all(type(v) is int for v in reply)
                or not INVALID_N <= reply[0] <= WOULD_DENY):
            raise ProtocolError("malformed acquire answer: %r" % (reply,))
        return cls(*reply)


def acquire_answer(r, script, key, app, n, critical=False):
    """Runs the acquire script once: app takes n tokens from the hash at key.

    app and n are sent as given (n as a string, or an int written in
    decimal), so this is also how to send a malformed argument on purpose.
    A critical request may take the bucket's reserve: it adds the protocol
    argument of the first version ("1") and the critical flag ("1"). A key
    of another type raises WrongType; other Redis errors propagate.
    """
    if isinstance(n, bool) or not isinstance(n, (int, str)):
        raise TypeError("n must be an int or a string, not %s" % type(n).__name__)
    args = [app, str(n)]
    if critical:
        args += ["1", "1"]
    try:
        reply = script.run(r, [key], args)
    except redis.exceptions.ResponseError as e:
        # Redis 7 starts the reply with WRONGTYPE; 6.2 wraps it in
        # "ERR Error running script".
        if "WRONGTYPE" in str(e):
            raise WrongType("key %s holds another type: %s" % (key, e)) from e
        raise
    return Answer.from_reply(reply)


@dataclass(frozen=True)
class Result:
    """The answer to an acquire that Redis allowed or denied."""

    allowed: bool
    # Whole tokens left after this call.
    remaining: int
    # When denied: microseconds until n tokens will be there (if nobody else
    # takes them first); 0 when allowed.
    retry_after_us: int
    # Microseconds until the bucket is full again.
    reset_after_us: int
    # The bucket's capacity.
    limit: int
    # True when the bucket is in shadow mode and would have denied: allowed
    # is True, nothing was taken, and retry_after_us says when the tokens
    # would have been there.
    would_deny: bool = False

    @property
    def retry_after(self):
        """retry_after_us in seconds."""
        return self.retry_after_us / 1e6

    @property
    def reset_after(self):
        """reset_after_us in seconds."""
        return self.reset_after_us / 1e6


@dataclass(frozen=True)
class SlotAnswer:
    """The seven integers of the slot script's answer."""

    code: int
    in_use: int
    limit: int
    retry_us: int
    slot_ms: int
    source: int
    shadow: int

    @classmethod
    def from_reply(cls, reply):
        if (not isinstance(reply, list) or len(reply) != 7 or not all(type(v) is int for v in reply)
                or not WRONG_KIND <= reply[0] <= WOULD_DENY):
            raise ProtocolError("malformed slot answer: %r" % (reply,))
        return cls(*reply)


def slot_answer(r, script, keys, app, op, slot_id, key=None):
    """Runs a slot script once: op ("take", "release", "renew") of slot_id.

    keys are the limit's hash and its slot set (slots_key), or, with the
    keyed slot script and key, the key's group hash and its state key
    followed by ":slots". Arguments are sent as given.
    """
    args = [app, op, slot_id] + ([key] if key is not None else [])
    try:
        reply = script.run(r, keys, args)
    except redis.exceptions.ResponseError as e:
        if "WRONGTYPE" in str(e):
            raise WrongType("key %s holds another type: %s" % (keys[0], e)) from e
        raise
    return SlotAnswer.from_reply(reply)


@dataclass(frozen=True)
class SlotResult:
    """The answer to a take, release or renew of a slot that Redis decided."""

    # take: the slot was taken (in shadow mode also where the limit was
    # full: would_deny); release: it was held and is free now; renew: it
    # was held and expires lease_ms from now.
    allowed: bool
    # Slots held after the call.
    in_use: int
    # The most slots held at once.
    limit: int
    # When a take was denied: microseconds until the first slot expires.
    retry_after_us: int
    # The slot lease time: a slot expires this long after it was taken or
    # renewed, unless renewed again.
    lease_ms: int
    would_deny: bool = False


class Slot:
    """A slot taken by Limiter.take_slot: release it when the work ends."""

    def __init__(self, limiter, limit, slot_id, result):
        self.limiter = limiter
        self.limit = limit
        self.id = slot_id
        self.result = result

    @property
    def allowed(self):
        return self.result.allowed

    def release(self):
        """Gives the slot back; a second release (or after expiry) frees nothing."""
        if not self.result.allowed:
            return SlotResult(False, 0, 0, 0, 0)
        return self.limiter._slot(self.limit, "release", self.id)

    def renew(self):
        """Moves the slot's expiry to a whole lease time from now; not allowed once expired."""
        if not self.result.allowed:
            return SlotResult(False, 0, 0, 0, 0)
        return self.limiter._slot(self.limit, "renew", self.id)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()
        return False


class Limiter:
    """Takes tokens from Sluice buckets for one app.

    r is a redis-py client (redis.Redis, or redis.RedisCluster, which sends
    the call to the node owning the key's slot). The script is read from
    the repository unless its source is given.
    """

    def __init__(self, r, app, prefix=DEFAULT_PREFIX, script=None, slot_script=None):
        if not valid_name(app):
            raise ValueError("invalid app name %r" % (app,))
        self.r = r
        self.app = app
        self.prefix = prefix
        self.script = script if script is not None else Script.load(ACQUIRE_LUA)
        self.slot_script = slot_script if slot_script is not None else Script.load(SLOT_LUA)

    def acquire(self, bucket, n=1, critical=False):
        """Takes n tokens from bucket.

        A critical request may take the bucket's reserve; any other is
        refused when it would leave less than the reserve (and n above
        capacity - reserve raises ExceedsCapacity). Returns a Result
        (allowed or denied); raises UnknownBucket, AppNotAllowed,
        ExceedsCapacity, InvalidN or WrongType for the other answers, and
        redis-py's errors when Redis fails (never resent).
        """
        if isinstance(n, bool) or not isinstance(n, int):
            raise TypeError("n must be an int, not %s" % type(n).__name__)
        if not valid_name(bucket):
            raise UnknownBucket("unknown bucket %r" % (bucket,))  # no such name can exist
        a = acquire_answer(self.r, self.script, bucket_key(bucket, self.prefix), self.app, n, critical)
        if a.code in (ALLOWED, DENIED, WOULD_DENY):
            return Result(a.code != DENIED, a.remaining, a.retry_us, a.reset_us, a.capacity, a.code == WOULD_DENY)
        if a.code == UNKNOWN_BUCKET:
            raise UnknownBucket("unknown bucket %r" % (bucket,))
        if a.code == APP_NOT_ALLOWED:
            raise AppNotAllowed("app %r not allowed on bucket %r" % (self.app, bucket), a.capacity)
        if a.code == EXCEEDS_CAPACITY:
            raise ExceedsCapacity("n=%d exceeds the capacity %d of bucket %r" % (n, a.capacity, bucket), a.capacity)
        raise InvalidN("n must be between 1 and 1000000000, not %r" % (n,))

    def allow(self, bucket):
        """Takes one token and reports whether it was granted (errors raise)."""
        return self.acquire(bucket, 1).allowed

    def take_slot(self, limit):
        """Takes a slot of concurrency limit limit; returns a Slot.

        slot.allowed says whether it was taken (else
        slot.result.retry_after_us says when the first slot expires). Use
        it as a context manager, or call slot.release() when the work ends.
        Raises UnknownBucket, AppNotAllowed, WrongKind or WrongType for the
        other answers, and redis-py's errors when Redis fails (never resent:
        the slot of a lost answer expires by itself).
        """
        if not valid_name(limit):
            raise UnknownBucket("unknown limit %r" % (limit,))  # no such name can exist
        slot_id = base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")
        return Slot(self, limit, slot_id, self._slot(limit, "take", slot_id))

    def _slot(self, limit, op, slot_id):
        a = slot_answer(self.r, self.slot_script, [bucket_key(limit, self.prefix), slots_key(limit, self.prefix)],
                        self.app, op, slot_id)
        if a.code in (ALLOWED, DENIED, WOULD_DENY):
            return SlotResult(a.code != DENIED, a.in_use, a.limit, a.retry_us, a.slot_ms, a.code == WOULD_DENY)
        if a.code == UNKNOWN_BUCKET:
            raise UnknownBucket("unknown limit %r" % (limit,))
        if a.code == APP_NOT_ALLOWED:
            raise AppNotAllowed("app %r not allowed on limit %r" % (self.app, limit), a.limit)
        if a.code == WRONG_KIND:
            raise WrongKind("limit %r is not a concurrency limit" % (limit,))
        raise ProtocolError("slot call answered %r" % (a,))
