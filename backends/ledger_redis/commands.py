"""The Redis ledger's keys, scripts and commands, built without I/O.

Keys. Standalone: ``{}`` first is an empty hash tag (Cluster would hash the WHOLE key),
kept as it always was so existing ledgers read the same keys. Cluster: every key of one
namespace carries the hash tag ``{dl-<sha256(ns)[:16]>}``, so the genesis key and every
record share one slot and ONE script proves the genesis and spends (a namespace then
lives on one master: see docs/redis.md). Redis keys are binary-safe and never globbed
by the commands used here, so the core's collision-free (namespace, id) encoding is
used as is.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, NamedTuple

from ledger_core.ids import ledger_key
from ledger_core.tokens import TOKEN_BYTES

from .errors import IDENTITY_ERROR

RECORD_PREFIX = b"{}dl:"
GENESIS_PREFIX = b"{}dl-genesis:"
# Every genesis key of the Cluster layout: the tag is 16 lowercase hex digits.
CLUSTER_GENESIS_PATTERN = b"{dl-" + b"?" * 16 + b"}dl-genesis:*"

Command = tuple[Any, ...]


def record_key(namespace: str, request_id: bytes) -> bytes:
    """The standalone key of one spent id: ``{}dl:<len(ns)>:<ns>:<id>`` (C7, C8)."""
    return RECORD_PREFIX + ledger_key(namespace, request_id)


def genesis_key(namespace: str) -> bytes:
    """The standalone key holding the random identity of one namespace (C6)."""
    return GENESIS_PREFIX + namespace.encode("utf-8")


def cluster_tag(namespace: str) -> bytes:
    """The hash tag of one namespace on a Cluster (hex: never contains ``}``)."""
    return b"{dl-" + hashlib.sha256(namespace.encode("utf-8")).hexdigest()[:16].encode() + b"}"


@dataclass(frozen=True)
class Keys:
    """Where one namespace's genesis and records live (standalone or Cluster layout)."""

    namespace: str
    cluster: bool = False

    @property
    def genesis(self) -> bytes:
        if self.cluster:
            return cluster_tag(self.namespace) + genesis_key(self.namespace)[2:]
        return genesis_key(self.namespace)

    def record(self, request_id: bytes) -> bytes:
        if self.cluster:
            return cluster_tag(self.namespace) + record_key(self.namespace, request_id)[2:]
        return record_key(self.namespace, request_id)

    @property
    def record_prefix(self) -> bytes:
        """What every record key of this namespace (and of no other) starts with."""
        return self.record(b"")

    @property
    def legacy_genesis(self) -> bytes | None:
        """The genesis key of the old Cluster layout (whole-key hashing), to refuse it."""
        return genesis_key(self.namespace) if self.cluster else None

    @property
    def genesis_pattern(self) -> bytes:
        """``SCAN MATCH`` for every namespace's genesis key in this layout."""
        return CLUSTER_GENESIS_PATTERN if self.cluster else glob_escape(GENESIS_PREFIX) + b"*"

    def namespace_of(self, key: bytes) -> bytes | None:
        """The namespace bytes a genesis key of this layout names, or ``None`` when the
        key is not one this layout would ever write (a tag that is not its namespace's)."""
        if self.cluster:
            tag, _, rest = key.partition(b"}")
            name = rest[len(GENESIS_PREFIX) - 2 :]
            if not rest.startswith(GENESIS_PREFIX[2:]):
                return None
            try:
                ours = cluster_tag(name.decode("utf-8"))
            except UnicodeDecodeError:
                return None
            return name if ours == tag + b"}" else None
        return key[len(GENESIS_PREFIX) :] if key.startswith(GENESIS_PREFIX) else None


def glob_escape(prefix: bytes) -> bytes:
    """``prefix`` for a ``SCAN ... MATCH`` pattern: the glob's special bytes escaped (a
    namespace may hold ``*``, ``?``, ``[``, ``\\``)."""
    return re.sub(rb"([*?\[\]\\])", rb"\\\1", prefix)


# The identity proof every spend and read makes in its own round trip. KEYS[1] is the
# genesis key; ARGV[1] is the genesis value this ledger opened with (32 hex digits),
# then, unless failover_may_lose_spends=accept, ":" and the replication epoch it opened
# under: empty when the server had no replication (no backlog: no replica attached, so
# no failover target holds a copy), else the master's master_replid, which a promotion
# (and a restart) replaces. The server's role and epoch are read by INFO inside the
# script, atomically with the spend (effects replication first: Redis 3.2 - 4 would
# refuse a write after INFO otherwise). An error reply, never a value, so no reply can be
# mistaken for an answer.
_PROVE_GENESIS = (
    "local g = redis.call('GET', KEYS[1]) "
    "if g ~= string.sub(ARGV[1], 1, 32) then "
    "if g then return redis.error_reply('" + IDENTITY_ERROR + " changed') end "
    "return redis.error_reply('" + IDENTITY_ERROR + " gone') end "
    "if #ARGV[1] > 32 then "
    "if redis.replicate_commands then redis.replicate_commands() end "
    "local i = redis.call('INFO', 'replication') "
    "local e = '' "
    "if string.find(i, 'repl_backlog_active:1', 1, true) then "
    "e = string.match(i, 'master_replid:(%x+)') or '?' end "
    "if e ~= string.sub(ARGV[1], 34) or not string.find(i, 'role:master', 1, true) then "
    "return redis.error_reply('" + IDENTITY_ERROR + " replication') end end "
)
# What open reads, routed by the genesis key to the master that owns its slot (the
# same node every spend's script runs on): its role, whether it keeps a replication
# backlog (a replica attached within repl-backlog-ttl), its master_replid, replicas, and
# its good replicas when min-replicas-to-write is set (empty otherwise).
EPOCH_BODY = (
    "local i = redis.call('INFO', 'replication') "
    "local function f(n) return string.match(i, n .. ':([^\\r\\n]*)') or '' end "
    "return {f('role'), f('repl_backlog_active'), f('master_replid'), f('connected_slaves'), "
    "f('min_slaves_good_slaves')}"
)

# spend: SET NX GET in Lua, behind the genesis proof. nil: written now by us; a value:
# whose token is stored (ours after a lost reply, or someone else's).
SPEND_BODY = (
    _PROVE_GENESIS + "local v = redis.call('GET', KEYS[2]) "
    "if v then return v end "
    "redis.call('SET', KEYS[2], ARGV[2]) "
    "return false"
)
# spend_as (C10): the same, the value being the token and the attempt's 32-byte digest.
# When the stored value carries the same digest (the same attempt re-entering), it is
# written again, unchanged: a write on this connection after the original record, so a
# WAIT/WAITAOF in the same trip vouches for it (replication is in order).
SPEND_AS_BODY = (
    _PROVE_GENESIS + "local v = redis.call('GET', KEYS[2]) "
    "if v then "
    "if #v == 48 and #ARGV[2] == 48 and string.sub(v, 17) == string.sub(ARGV[2], 17) then "
    "redis.call('SET', KEYS[2], v) end "
    "return v end "
    "redis.call('SET', KEYS[2], ARGV[2]) "
    "return false"
)
# is_spent: declared WITHOUT the no-writes flag (Redis >= 7), so a read-only replica
# refuses it (READONLY) in the same round trip: reads follow the spends' rule.
READ_BODY = _PROVE_GENESIS + "return redis.call('EXISTS', KEYS[2])"
# A listing page: the proof alone, sent right AFTER the page's SCAN, so a page answered
# by a store that forgot (or failed over) before the proof ran is refused.
PROVE_BODY = _PROVE_GENESIS + "return 1"
SHEBANG = "#!lua\n"

# Before Redis 7, SET cannot combine NX and GET; kept for hosts that used it.
RESOLVE_SCRIPT = (
    "local v = redis.call('GET', KEYS[1]) "
    "if v then return v end "
    "redis.call('SET', KEYS[1], ARGV[1]) "
    "return false"
)


@dataclass(frozen=True)
class Script:
    """One Lua script: sent as ``EVALSHA``, and as ``EVAL`` after ``NOSCRIPT``."""

    body: str

    @cached_property
    def sha(self) -> str:
        return hashlib.sha1(self.body.encode("utf-8")).hexdigest()

    def evalsha(self, *args: Any) -> Command:
        return ("EVALSHA", self.sha, 2, *args)


SCRIPTS = {
    s.sha: s
    for s in (
        Script(prefix + body)
        for body in (SPEND_BODY, SPEND_AS_BODY, READ_BODY)
        for prefix in ("", SHEBANG)
    )
}


def as_eval(commands: Sequence[Command]) -> list[Command]:
    """The same commands with ``EVALSHA`` turned into ``EVAL`` (the server lost its
    script cache: a restart, ``SCRIPT FLUSH``, a failover). Safe to resend: a
    ``NOSCRIPT`` reply means the script did not run."""
    out: list[Command] = []
    for command in commands:
        if command[0] == "EVALSHA" and command[1] in SCRIPTS:
            out.append(("EVAL", SCRIPTS[command[1]].body, *command[2:]))
        else:
            out.append(command)
    return out


@dataclass(frozen=True)
class Plan:
    """The commands of a spend and of a read, chosen once at open (by
    :func:`.decisions.plan_for`).

    Both are one Lua script that first proves the namespace's genesis is the one this
    ledger opened with, then acts, in the same round trip. ``shebang`` declares the
    scripts for Redis >= 7; ``wait`` is the ``WAIT``/``WAITAOF`` pipelined after a spend.
    """

    keys: Keys
    genesis: bytes
    epoch: bytes | None = None  # None: failover_may_lose_spends=accept (not proven)
    shebang: bool = True
    wait: Command | None = None
    probe_waitaof: bool = False

    @cached_property
    def proof(self) -> bytes:
        """ARGV[1] of every script: the genesis, and the epoch to prove with it."""
        return self.genesis if self.epoch is None else self.genesis + b":" + self.epoch

    @cached_property
    def spend_script(self) -> Script:
        return Script((SHEBANG if self.shebang else "") + SPEND_BODY)

    @cached_property
    def spend_as_script(self) -> Script:
        return Script((SHEBANG if self.shebang else "") + SPEND_AS_BODY)

    @cached_property
    def read_script(self) -> Script:
        return Script((SHEBANG if self.shebang else "") + READ_BODY)

    def spend_commands(self, request_id: bytes, value: bytes) -> list[Command]:
        """One trip: the genesis-proving ``SET NX GET`` script (and ``WAIT``). ``value``
        is the attempt token (spend) or the token and the attempt digest (spend_as, its
        own script); a resend after a lost reply is the same commands (C5)."""
        key = self.keys.record(request_id)
        script = self.spend_script if len(value) == TOKEN_BYTES else self.spend_as_script
        first = script.evalsha(self.keys.genesis, key, self.proof, value)
        return [first] if self.wait is None else [first, self.wait]

    @cached_property
    def proof_command(self) -> Command:
        """The identity proof alone (``EVAL``: one per listing page)."""
        body = (SHEBANG if self.shebang else "") + PROVE_BODY
        return ("EVAL", body, 1, self.keys.genesis, self.proof)

    def read_commands(self, request_id: bytes) -> list[Command]:
        key = self.keys.record(request_id)
        return [self.read_script.evalsha(self.keys.genesis, key, self.proof)]

    def spend_many_commands(
        self, request_ids: Sequence[bytes], tokens: Sequence[bytes]
    ) -> list[Command]:
        """One trip: the spend script per id (a token each, so a repeat within the
        batch finds its first copy's token: ``False``), then one ``WAIT`` for all."""
        out = [
            self.spend_script.evalsha(self.keys.genesis, self.keys.record(rid), self.proof, tok)
            for rid, tok in zip(request_ids, tokens, strict=True)
        ]
        return out if self.wait is None else [*out, self.wait]


# INFO (role, version, maxmemory-policy, aof_enabled) and CONFIG GET (save,
# appendfsync): what decides durability and identity, at open and on every re-check.
FACT_COMMANDS: list[Command] = [
    ("INFO",),
    ("CONFIG", "GET", "save"),
    ("CONFIG", "GET", "appendfsync"),
]


def epoch_command(keys: Keys) -> Command:
    """Read the replication facts of the master that owns the namespace's slot."""
    return ("EVAL", EPOCH_BODY, 1, keys.genesis)


def scan_command(cursor: int, pattern: bytes, count: int) -> Command:
    return ("SCAN", cursor, "MATCH", pattern, "COUNT", count)


def redis_options(command: Command) -> dict[str, Any]:
    """What redis-py's ``execute_command`` needs beside ``command``: ``SET`` with ``GET``
    must come back raw (redis-py parses replies by command name)."""
    return {"get": True} if command[0] == "SET" and "GET" in command else {}


# What the decisions ask of redis-py, one operation at a time (``ledger.py`` and
# ``aio.py`` perform them): a pooled connection, then send and read on it, or a Cluster
# client's own command. Typed named tuples: immutable, and as cheap as a plain tuple on
# the hot path (four per trip).
class Borrow(NamedTuple):
    pass


class Send(NamedTuple):
    conn: Any
    commands: Sequence[Command]


class Read(NamedTuple):
    conn: Any


class Release(NamedTuple):
    conn: Any
    drop: bool = False  # failed mid-exchange: disconnected, never reused


class Exec(NamedTuple):
    command: Command
    options: Mapping[str, Any] = {}  # redis-py keywords (target_nodes); never mutated


class Primaries(NamedTuple):
    pass


Op = Borrow | Send | Read | Release | Exec | Primaries
BORROW, PRIMARIES = Borrow(), Primaries()
