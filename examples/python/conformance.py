#!/usr/bin/env python3
"""Runs the conformance table of the Sluice protocol (docs/conformance.json)
against a real Redis with the reference client in sluice.py.

    python3 examples/python/conformance.py --addr 127.0.0.1:6379

Every case runs twice, each time under a fresh key prefix: once sending the
raw arguments of each step to the acquire script (as any client would), and
once through Limiter.acquire, whose typed results and errors must say the
same. Buckets are set up with the apply and delete scripts, as the sync
worker does. Keyed buckets and their overrides are set up with the keyed
apply and override scripts in each of the 64 key groups; keyed acquires
run the keyed acquire script with the keys computed from the key's SHA-1
(docs/protocol.md, "Keyed buckets") in both modes, since the Python
Limiter has no keyed form: the limiter mode with protocol 2 (nine
integers, the ninth the key's shadow mode), the script mode without.
The keys it writes are deleted at the end. Exit status: 0 when
everything passed, 1 when a check failed, 2 when it could not run.
"""

import argparse
import base64
import hashlib
import json
import os
import secrets
import sys
import time
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import redis

import sluice

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))

CODES = {
    "allowed": sluice.ALLOWED, "denied": sluice.DENIED, "unknown_bucket": sluice.UNKNOWN_BUCKET,
    "app_not_allowed": sluice.APP_NOT_ALLOWED, "exceeds_capacity": sluice.EXCEEDS_CAPACITY,
    "invalid_n": sluice.INVALID_N, "would_deny": sluice.WOULD_DENY, "invalid_key": -5,
    "wrong_kind": sluice.WRONG_KIND,
}
APPLY_OUTCOMES = {1: "created", 2: "updated", 3: "unchanged", 4: "stale", 5: "tombstoned"}
FIELDS = ["remaining", "retry_us", "reset_us", "capacity", "permits_micro", "period"]
ACTIONS = ["apply", "delete", "acquire", "wait_us", "foreign", "exists", "apply_keyed", "override", "acquire_key",
           "adjust", "acquire_all", "lease", "slot", "periods"]
# The implementations a case may list (docs/protocol.md, "Conformance
# table"); this client is "script" (raw calls) and "limiter" (Limiter).
MODES = ("script", "limiter")
LEASE_FIELDS = ["granted", "remaining", "retry_us", "capacity", "permits_micro", "period", "lease_ms"]
SLOT_FIELDS = ["in_use", "limit", "retry_us", "slot_ms"]
OVERRIDE_OUTCOMES = {0: "absent", 1: "written", 2: "updated", 3: "unchanged", 4: "stale", 5: "tombstoned", 6: "no_bucket"}
SOURCES = {"bucket": 0, "exact": 1, "prefix": 2}
KEY_GROUPS = 64


def group_key(bucket, g, prefix):
    """The hash of key group g of a keyed bucket: <prefix>k{<bucket>:<g>}."""
    return "%sk{%s:%d}" % (prefix, bucket, g)


B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def slot(tag):
    """The Redis Cluster slot of a hash tag's content: CRC16 (XMODEM) mod 16384."""
    crc = 0
    for c in tag:
        crc ^= c << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc % 16384


_SLOT_TAGS = {}


def slot_tag(s):
    """The first 3 base64url characters (first slowest) whose slot is s."""
    if not _SLOT_TAGS:
        for i in range(64 ** 3):
            t = (B64[i >> 12] + B64[(i >> 6) & 63] + B64[i & 63]).encode()
            _SLOT_TAGS.setdefault(slot(t), t.decode())
    return _SLOT_TAGS[s]


def name_hash(bucket):
    """64-bit FNV-1a of the bucket name."""
    h = 14695981039346656037
    for c in bucket.encode():
        h = ((h ^ c) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def keyed_keys(bucket, key, prefix):
    """The group hash and the state key of key (bytes or str) in a keyed bucket."""
    d = hashlib.sha1(key.encode("utf-8") if isinstance(key, str) else key).digest()
    g = int.from_bytes(d[8:10], "big") % KEY_GROUPS
    state_id = base64.urlsafe_b64encode((int.from_bytes(d[:8], "big") ^ name_hash(bucket)).to_bytes(8, "big"))
    tag = slot_tag(slot(("%s:%d" % (bucket, g)).encode()))
    return group_key(bucket, g, prefix), "%s{%s}%s%s" % (prefix, tag, B64[g], state_id.decode()[:11])


class Failure(Exception):
    pass


def day_start(d, zone):
    """The first instant of local date d in zone, in UTC: midnight, or the
    instant of a change of offset that skips it (fold 0 takes the offset
    before the change), the first of two midnights."""
    return datetime(d.year, d.month, d.day, tzinfo=zone).astimezone(timezone.utc)


def period_start(period, zone, t):
    """The start of the quota period containing t (UTC) in zone."""
    local = t.astimezone(zone)
    if period == "hour":
        # Minute 0 of the local hour, as an instant (UTC arithmetic).
        return t - timedelta(minutes=local.minute, seconds=local.second, microseconds=local.microsecond)
    d = local.date()
    if period == "week":
        d -= timedelta(days=d.weekday())
    elif period == "month":
        d = d.replace(day=1)
    return day_start(d, zone)


def period_next(period, zone, start):
    """The start of the period after the one starting at start."""
    if period == "hour":
        return period_start(period, zone, start + timedelta(hours=1))
    d = start.astimezone(zone).date()
    if period == "day":
        d += timedelta(days=1)
    elif period == "week":
        d += timedelta(days=7)
    else:
        d = (d.replace(day=28) + timedelta(days=4)).replace(day=1)
    return day_start(d, zone)


def holds(want, got):
    """want is an integer, or {"min": a, "max": b} for time-dependent values."""
    if isinstance(want, dict):
        return want["min"] <= got <= want["max"]
    return got == want


class Run:
    def __init__(self, r, prefix, scripts_dir):
        self.r = r
        self.prefix = prefix
        self.acquire = sluice.Script.load(os.path.join(scripts_dir, "acquire.lua"))
        # The config scripts are sent after config_guards.lua, their shared
        # argument checks and guards, apply also after lua/packed.lua and
        # lua/state.lua, the packed limit and the state it writes
        # (docs/protocol.md).
        guards = os.path.join(scripts_dir, "config_guards.lua")
        packed = os.path.join(scripts_dir, "lua", "packed.lua")
        state = os.path.join(scripts_dir, "lua", "state.lua")
        self.apply = sluice.Script.load(guards, packed, state, os.path.join(scripts_dir, "apply.lua"))
        self.delete = sluice.Script.load(guards, os.path.join(scripts_dir, "delete.lua"))
        self.keyed_acquire = sluice.Script.load(os.path.join(scripts_dir, "keyed_acquire.lua"))
        self.keyed_apply = sluice.Script.load(guards, os.path.join(scripts_dir, "keyed_apply.lua"))
        self.override = sluice.Script.load(guards, os.path.join(scripts_dir, "override.lua"))
        # The Python Limiter takes single acquires only: refunds and
        # charges, several buckets at once and leases run as raw calls of
        # the stand-alone scripts in both modes.
        self.adjust = sluice.Script.load(os.path.join(scripts_dir, "adjust.lua"))
        self.acquire_all = sluice.Script.load(os.path.join(scripts_dir, "acquire_all.lua"))
        self.lease = sluice.Script.load(os.path.join(scripts_dir, "lease.lua"))
        # Concurrency limits: Limiter.take_slot takes slots of shared
        # limits; keyed slots run as raw calls in both modes.
        self.slot = sluice.Script.load(os.path.join(scripts_dir, "slot.lua"))
        self.keyed_slot = sluice.Script.load(os.path.join(scripts_dir, "keyed_slot.lua"))
        self.failures = []

    def fail(self, where, msg):
        self.failures.append("%s: %s" % (where, msg))

    def case(self, case, mode, prefix):
        limiters = {}
        # The slots the limiter mode took, by the table's slot id.
        self.held = {}
        # A quota's table (bounds_s) is offsets in seconds from the
        # case's base: Redis's clock, in whole seconds, when the first step
        # with a table ran.
        self.base = None
        for i, step in enumerate(case["steps"], 1):
            where = "%s [%s], step %d" % (case["name"], mode, i)
            actions = [a for a in ACTIONS if a in step]
            if len(actions) != 1:
                raise Failure("%s: a step has exactly one action: %r" % (where, step))
            action = actions[0]
            try:
                getattr(self, "step_" + action)(step, prefix, mode, limiters, where)
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
                raise
            except redis.exceptions.RedisError as e:
                self.fail(where, "unexpected Redis error: %s" % e)

    def kind_args(self, a):
        """The kind, the quota's table (the eleventh argument) and the slot
        lease time (the twelfth) of an apply; the reserve follows, the
        thirteenth, and the state's form, the fourteenth."""
        table = ""
        if "bounds_s" in a:
            if self.base is None:
                self.base = int(self.r.time()[0])
            table = "".join("%010d" % (self.base + o) for o in a["bounds_s"])
        return [a.get("kind", "bucket"), table, str(a.get("slot_ms", 0))]

    def step_apply(self, step, prefix, mode, limiters, where):
        a = step["apply"]
        b = a["bucket"]
        args = [str(a["id"]), str(a["version"]), str(a["capacity"]), a["permits"], str(a["period"]),
                "," + ",".join(a["apps"]) + ",", "1" if a.get("force") else "0", str(a.get("lease_ms", 0)),
                "1" if a.get("shadow") else "0"] + self.kind_args(a) + [str(a.get("reserve", 0)), "binary"]
        want = step["want"]
        try:
            got = APPLY_OUTCOMES.get(self.apply.run(self.r, [sluice.bucket_key(b, prefix),
                                                             sluice.bucket_key(b, prefix) + ":deleted"], args))
        except redis.exceptions.ResponseError as e:
            if not (isinstance(want, dict) and want["error"] in str(e)):
                self.fail(where, "apply: %s, want %r" % (e, want))
            return
        if got != want:
            self.fail(where, "apply: %s, want %r" % (got, want))

    def step_delete(self, step, prefix, mode, limiters, where):
        d = step["delete"]
        key = sluice.bucket_key(d["bucket"], prefix)
        got = self.delete.run(self.r, [key, key + ":deleted"], [str(d["id"]), str(d["version"]), "604800"])
        if (got == 1) != step["want"]:
            self.fail(where, "delete: %r, want %r" % (got, step["want"]))

    def step_wait_us(self, step, prefix, mode, limiters, where):
        # Sleeping longer only refills more; the table allows for that.
        time.sleep(step["wait_us"] / 1e6 + 0.002)

    def step_foreign(self, step, prefix, mode, limiters, where):
        f = step["foreign"]
        key = sluice.bucket_key(f["bucket"], prefix)
        kind = f["type"]
        if kind == "string":
            self.r.set(key, "x")
        elif kind == "list":
            self.r.rpush(key, "x")
        elif kind == "hash":
            self.r.hset(key, "note", "x")
        else:
            raise Failure("%s: foreign type %r" % (where, kind))

    def step_exists(self, step, prefix, mode, limiters, where):
        got = self.r.exists(sluice.bucket_key(step["exists"], prefix)) == 1
        if got != step["want"]:
            self.fail(where, "exists %s = %r, want %r" % (step["exists"], got, step["want"]))

    def step_apply_keyed(self, step, prefix, mode, limiters, where):
        a = step["apply_keyed"]
        args = [str(a["id"]), str(a["version"]), str(a["capacity"]), a["permits"], str(a["period"]),
                "," + ",".join(a["apps"]) + ",", "1" if a.get("force") else "0", "0",
                "1" if a.get("shadow") else "0"] + self.kind_args(a) + [str(a.get("reserve", 0))]
        got = set()
        for g in range(KEY_GROUPS):
            k = group_key(a["bucket"], g, prefix)
            got.add(self.keyed_apply.run(self.r, [k, k + ":deleted"], args))
        # The outcome over the groups is the strongest: created, updated, unchanged, tombstoned, stale.
        out = next((APPLY_OUTCOMES[o] for o in (1, 2, 3, 5, 4) if o in got), None)
        if out != step["want"]:
            self.fail(where, "apply keyed: %s, want %r" % (out, step["want"]))

    def step_override(self, step, prefix, mode, limiters, where):
        o = step["override"]
        args = [str(o["bucket_id"]), "set", "e" if o["match"] == "exact" else "p", o["key"], str(o["id"]),
                str(o["version"]), str(o["capacity"]), o["permits"], str(o["period"]), "0",
                "1" if o.get("shadow") else "0"]
        if o["match"] == "exact":
            groups = [keyed_keys(o["bucket"], o["key"], prefix)[0]]
        else:
            groups = [group_key(o["bucket"], g, prefix) for g in range(KEY_GROUPS)]
        res = [self.override.run(self.r, [k, k + ":deleted"], args) for k in groups]
        # A write in any group, else an update in any, else the first group's outcome.
        out = 1 if 1 in res else 2 if 2 in res else res[0]
        if OVERRIDE_OUTCOMES.get(out) != step["want"]:
            self.fail(where, "override: %s, want %r" % (OVERRIDE_OUTCOMES.get(out), step["want"]))

    def step_acquire_key(self, step, prefix, mode, limiters, where):
        q = step["acquire_key"]
        want = step["want"]
        where = "%s: acquire %s[%r] %r n=%r" % (where, q["bucket"], q["key"], q["app"], q["n"])
        base, state = keyed_keys(q["bucket"], q["key"], prefix)
        # The limiter mode asks for protocol 2 (a ninth integer, the key's
        # shadow mode, as a client with a local fallback does); the script
        # mode sends the arguments of the first version, eight integers (a
        # critical acquire with the protocol "1" before its flag).
        args = [q["app"], q["n"], q["key"]]
        width = 8
        if mode == "limiter":
            args.append("2")
            width = 9
        elif q.get("critical"):
            args.append("1")
        if q.get("critical"):
            args.append("1")
        reply = self.keyed_acquire.run(self.r, [base, state], args)
        if not isinstance(reply, list) or len(reply) != width:
            self.fail(where, "malformed answer %r" % (reply,))
            return
        if reply[0] != CODES[want["code"]]:
            self.fail(where, "got %r, want %s" % (reply, want["code"]))
            return
        for i, f in enumerate(FIELDS, 1):
            if not holds(want[f], reply[i]):
                self.fail(where, "%s = %d, want %r" % (f, reply[i], want[f]))
        if reply[7] != SOURCES[want["source"]]:
            self.fail(where, "source = %d, want %s" % (reply[7], want["source"]))
        if width == 9:
            # A would-deny is in shadow mode, a denial is not; the other
            # answers carry 0 or 1 (0 for the refusals without a limit).
            want_shadow = {"would_deny": (1,), "denied": (0,)}.get(want["code"], (0, 1))
            if want["code"] in ("unknown_bucket", "app_not_allowed", "invalid_n", "invalid_key"):
                want_shadow = (0,)
            if reply[8] not in want_shadow:
                self.fail(where, "shadow = %r, want one of %r" % (reply[8], want_shadow))

    def check_answer(self, where, want, reply, fields):
        """Checks an answer of seven integers (and more) against want."""
        if reply[0] != CODES[want["code"]]:
            self.fail(where, "got %r, want %s" % (reply, want["code"]))
            return
        for i, f in enumerate(fields, 1):
            if not holds(want[f], reply[i]):
                self.fail(where, "%s = %d, want %r" % (f, reply[i], want[f]))

    def step_adjust(self, step, prefix, mode, limiters, where):
        q = step["adjust"]
        where = "%s: adjust %s %s %r n=%r" % (where, q["bucket"], q["op"], q["app"], q["n"])
        reply = self.adjust.run(self.r, [sluice.bucket_key(q["bucket"], prefix)], [q["app"], q["op"], q["n"]])
        if not isinstance(reply, list) or len(reply) != 8:
            self.fail(where, "malformed answer %r" % (reply,))
            return
        self.check_answer(where, step["want"], reply, FIELDS + ["applied"])

    def step_acquire_all(self, step, prefix, mode, limiters, where):
        q = step["acquire_all"]
        want = step["want"]
        where = "%s: acquire all %r %r" % (where, q["app"], q["entries"])
        keys, argv = [], [q["app"], str(len(q["entries"]))]
        for e in q["entries"]:
            if e.get("key") is None:
                keys.append(sluice.bucket_key(e["bucket"], prefix))
                argv += ["b", "", e["n"]]
            else:
                keys += list(keyed_keys(e["bucket"], e["key"], prefix))
                argv += ["k", e["key"], e["n"]]
        if q.get("critical"):
            argv.append("1")
        reply = self.acquire_all.run(self.r, keys, argv)
        # A malformed call as a whole answers [-4]; else the overall code
        # and seven integers per entry.
        if not isinstance(reply, list) or len(reply) not in (1, 1 + 7 * len(q["entries"])):
            self.fail(where, "malformed answer %r" % (reply,))
            return
        if reply[0] != CODES[want["code"]]:
            self.fail(where, "got %r, want %s" % (reply, want["code"]))
            return
        if len(reply) == 1:
            if want["entries"]:
                self.fail(where, "got %r, want entries" % (reply,))
            return
        for i, ew in enumerate(want["entries"]):
            self.check_answer("%s, entry %d" % (where, i), ew, reply[1 + 7 * i:8 + 7 * i], FIELDS)

    def step_lease(self, step, prefix, mode, limiters, where):
        q = step["lease"]
        where = "%s: lease %s %r want=%r back=%r" % (where, q["bucket"], q["app"], q["want"], q["back"])
        reply = self.lease.run(self.r, [sluice.bucket_key(q["bucket"], prefix)], [q["app"], q["want"], q["back"]])
        if not isinstance(reply, list) or len(reply) != 8:
            self.fail(where, "malformed answer %r" % (reply,))
            return
        self.check_answer(where, step["want"], reply, LEASE_FIELDS)

    def step_slot(self, step, prefix, mode, limiters, where):
        q = step["slot"]
        want = step["want"]
        where = "%s: slot %s[%r] %r %s %r" % (where, q["bucket"], q.get("key"), q["app"], q["op"], q["id"])
        if "key" in q:
            base, state = keyed_keys(q["bucket"], q["key"], prefix)
            a = sluice.slot_answer(self.r, self.keyed_slot, [base, state + ":slots"], q["app"], q["op"], q["id"], q["key"])
            self.check_slot(where, want, a, 7)
            return
        if mode == "script":
            a = sluice.slot_answer(self.r, self.slot, [sluice.bucket_key(q["bucket"], prefix),
                                                      sluice.slots_key(q["bucket"], prefix)], q["app"], q["op"], q["id"])
            self.check_slot(where, want, a, 7)
            return
        # The limiter chooses its own slot ids: the table's name its slots.
        held = self.held
        app = q["app"]
        if app not in limiters:
            limiters[app] = sluice.Limiter(self.r, app, prefix=prefix, script=self.acquire, slot_script=self.slot)
        code, res = None, None
        try:
            if q["op"] == "take":
                if q["id"] in held and held[q["id"]].allowed:
                    raise Failure("%s: a client cannot take a slot id it holds; list the case's implementations" % where)
                s = limiters[app].take_slot(q["bucket"])
                held[q["id"]] = s
                res = s.result
            elif q["id"] not in held:
                raise Failure("%s: a client cannot %s a slot it never took" % (where, q["op"]))
            elif not held[q["id"]].allowed:
                code = "denied"  # never held: answered without a call
            elif q["op"] == "release":
                res = held[q["id"]].release()
            else:
                res = held[q["id"]].renew()
        except sluice.UnknownBucket:
            code = "unknown_bucket"
        except sluice.AppNotAllowed:
            code = "app_not_allowed"
        except sluice.WrongKind:
            code = "wrong_kind"
        if res is not None:
            code = "would_deny" if res.would_deny else "allowed" if res.allowed else "denied"
        if code != want["code"]:
            self.fail(where, "got %s (%r), want %s" % (code, res, want["code"]))
            return
        if res is None:
            return
        got = {"in_use": res.in_use, "limit": res.limit, "retry_us": res.retry_after_us, "slot_ms": res.lease_ms}
        for f in SLOT_FIELDS:
            if not holds(want[f], got[f]):
                self.fail(where, "%s = %d, want %r" % (f, got[f], want[f]))

    def check_slot(self, where, want, a, fields):
        if a.code != CODES[want["code"]]:
            self.fail(where, "got %r, want %s" % (a, want["code"]))
            return
        for f in SLOT_FIELDS:
            if not holds(want[f], getattr(a, f)):
                self.fail(where, "%s = %d, want %r" % (f, getattr(a, f), want[f]))
        if a.source != SOURCES[want["source"]] or a.shadow != want["shadow"]:
            self.fail(where, "source, shadow = %d, %d, want %s, %d" % (a.source, a.shadow, want["source"], want["shadow"]))
    def step_periods(self, step, prefix, mode, limiters, where):
        # The calendar arithmetic of quotas, here with Python's own time
        # zones: an implementation independent of the Go one.
        q = step["periods"]
        at = datetime.strptime(q["at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
        s = period_start(q["period"], ZoneInfo(q["zone"]), at)
        got = []
        for _ in range(q["count"]):
            got.append(s.strftime("%Y-%m-%dT%H:%M:%SZ"))
            s = period_next(q["period"], ZoneInfo(q["zone"]), s)
        if got != step["want"]:
            self.fail(where, "periods %r: %r, want %r" % (q, got, step["want"]))

    def step_acquire(self, step, prefix, mode, limiters, where):
        q = step["acquire"]
        want = step["want"]
        where = "%s: acquire %s %r n=%r" % (where, q["bucket"], q["app"], q["n"])
        if mode == "script":
            self.check_script(q, want, prefix, where)
        else:
            self.check_limiter(q, want, prefix, limiters, where)

    def check_script(self, q, want, prefix, where):
        try:
            a = sluice.acquire_answer(self.r, self.acquire, sluice.bucket_key(q["bucket"], prefix), q["app"], q["n"],
                                      q.get("critical", False))
        except sluice.WrongType as e:
            if "error" not in want or want["error"] not in str(e):
                self.fail(where, "%s, want %r" % (e, want))
            return
        if "error" in want:
            self.fail(where, "got %r, want an error containing %r" % (a, want["error"]))
            return
        if a.code != CODES[want["code"]]:
            self.fail(where, "got %r, want %s" % (a, want["code"]))
            return
        for f in FIELDS:
            if not holds(want[f], getattr(a, f)):
                self.fail(where, "%s = %d, want %r" % (f, getattr(a, f), want[f]))

    def check_limiter(self, q, want, prefix, limiters, where):
        n = q["n"]
        try:
            v = int(n, 10)
        except ValueError:
            return  # an int cannot be sent as "1e3"
        if str(v) != n:
            return  # nor as "01" or " 1"
        app = q["app"]
        if app not in limiters:
            try:
                limiters[app] = sluice.Limiter(self.r, app, prefix=prefix, script=self.acquire, slot_script=self.slot)
            except ValueError:
                # An app name the client refuses can never take tokens.
                if want.get("code") != "app_not_allowed":
                    self.fail(where, "the client refuses app %r, want %r" % (app, want))
                return
        got = {}
        try:
            res = limiters[app].acquire(q["bucket"], v, critical=q.get("critical", False))
            code = "would_deny" if res.would_deny else "allowed" if res.allowed else "denied"
            got = {"code": code, "remaining": res.remaining,
                   "retry_us": res.retry_after_us, "reset_us": res.reset_after_us, "capacity": res.limit}
        except sluice.WrongType as e:
            got = {"error": str(e)}
        except sluice.UnknownBucket:
            got = {"code": "unknown_bucket", "capacity": 0}
        except sluice.AppNotAllowed as e:
            got = {"code": "app_not_allowed", "capacity": e.limit}
        except sluice.ExceedsCapacity as e:
            got = {"code": "exceeds_capacity", "capacity": e.limit}
        except sluice.InvalidN:
            got = {"code": "invalid_n", "capacity": 0}
        if "error" in want:
            if "error" not in got or want["error"] not in got["error"]:
                self.fail(where, "got %r, want an error containing %r" % (got, want["error"]))
            return
        if got.get("code") != want["code"]:
            self.fail(where, "got %r, want %s" % (got, want["code"]))
            return
        for f in ["remaining", "retry_us", "reset_us", "capacity"]:
            if not holds(want[f], got.get(f, 0)):
                self.fail(where, "%s = %d, want %r" % (f, got.get(f, 0), want[f]))

    def check_noscript(self):
        """An empty script cache costs one EVAL, and the call still answers."""
        where = "NOSCRIPT"
        if self.r.script_load(self.acquire.source) != self.acquire.sha:
            self.fail(where, "SCRIPT LOAD returned another SHA1 than sha1(acquire.lua)")
        # A variant nobody has loaded stands in for a flushed cache (this
        # run must not flush a shared server's cache).
        fresh = sluice.Script(self.acquire.source + "\n-- conformance " + secrets.token_hex(8) + "\n")
        key = sluice.bucket_key("nope", self.prefix + "noscript:")
        for want_reloads in (1, 1):
            a = sluice.acquire_answer(self.r, fresh, key, "svc", 1)
            if a.code != sluice.UNKNOWN_BUCKET or fresh.reloads != want_reloads:
                self.fail(where, "answer %r after %d reloads, want unknown bucket after %d" %
                          (a, fresh.reloads, want_reloads))

    def cleanup(self):
        pattern = "".join("\\" + c if c in "*?[]\\" else c for c in self.prefix) + "*"
        for key in self.r.scan_iter(match=pattern, count=1000):
            self.r.delete(key)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--addr", default=os.environ.get("SLUICE_TEST_REDIS_ADDR", "127.0.0.1:6379"),
                   help="Redis host:port (default $SLUICE_TEST_REDIS_ADDR or 127.0.0.1:6379)")
    p.add_argument("--prefix", default="sluice-conformance-" + secrets.token_hex(4) + ":",
                   help="key prefix of this run; its keys are deleted at the end")
    p.add_argument("--table", default=os.path.join(ROOT, "docs", "conformance.json"))
    p.add_argument("--scripts", default=os.path.join(ROOT, "internal", "redisscript"),
                   help="directory of acquire.lua, apply.lua and delete.lua")
    args = p.parse_args()

    host, _, port = args.addr.rpartition(":")
    try:
        with open(args.table, encoding="utf-8") as f:
            table = json.load(f)
        r = redis.Redis(host=host or "127.0.0.1", port=int(port), socket_timeout=30)
        r.ping()
        run = Run(r, args.prefix, args.scripts)
    except (OSError, ValueError, redis.exceptions.RedisError) as e:
        print("conformance: cannot run: %s" % e, file=sys.stderr)
        return 2

    steps = runs = 0
    try:
        for i, case in enumerate(table["cases"]):
            for mode in MODES:
                # A case lists the implementations it applies to; none, all.
                if mode not in case.get("implementations", MODES):
                    continue
                before = len(run.failures)
                run.case(case, mode, "%s%s%d:" % (args.prefix, mode, i))
                print("%s python/%s/%s" % ("ok  " if len(run.failures) == before else "FAIL", mode, case["name"]))
                steps += len(case["steps"])
                runs += 1
        run.check_noscript()
    except (Failure, KeyError, TypeError, AttributeError) as e:
        print("conformance: malformed table: %s" % e, file=sys.stderr)
        return 2
    except redis.exceptions.RedisError as e:
        print("conformance: redis failed: %s" % e, file=sys.stderr)
        return 2
    finally:
        try:
            run.cleanup()
        except redis.exceptions.RedisError:
            pass

    for f in run.failures:
        print("FAIL %s" % f)
    print("conformance: %d cases, %d runs of a case (python/script, python/limiter), %d steps, redis-py %s: %s" % (
        len(table["cases"]), runs, steps, redis.__version__, "FAILED" if run.failures else "ok"))
    return 1 if run.failures else 0


if __name__ == "__main__":
    sys.exit(main())
