"""The Redis ledger's keys, scripts and commands, built without I/O.

Standalone keys start with ``{}`` (an empty hash tag, kept so existing ledgers read the
same keys). On a Cluster every key of one namespace carries ``{dl-<sha256(ns)[:16]>}``,
so the genesis and every record share one slot and ONE script proves the genesis and
spends.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from ledger_core.errors import InvalidLedgerURL, UnsafeStoreConfig
from ledger_core.ids import ledger_key

from .errors import IDENTITY_ERROR
from .options import RedisOptions

RECORD_PREFIX = b"{}dl:"
GENESIS_PREFIX = b"{}dl-genesis:"
CLUSTER_GENESIS_PATTERN = b"{dl-" + b"?" * 16 + b"}dl-genesis:*"

Command = tuple[Any, ...]


def record_key(namespace: str, request_id: bytes) -> bytes:
    return RECORD_PREFIX + ledger_key(namespace, request_id)


def genesis_key(namespace: str) -> bytes:
    return GENESIS_PREFIX + namespace.encode("utf-8")


def cluster_tag(namespace: str) -> bytes:
    return b"{dl-" + hashlib.sha256(namespace.encode("utf-8")).hexdigest()[:16].encode() + b"}"


@dataclass(frozen=True)
class Keys:
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
        return self.record(b"")

    @property
    def legacy_genesis(self) -> bytes | None:
        """The genesis key of the old Cluster layout (whole-key hashing), to refuse it."""
        return genesis_key(self.namespace) if self.cluster else None

    @property
    def genesis_pattern(self) -> bytes:
        return CLUSTER_GENESIS_PATTERN if self.cluster else glob_escape(GENESIS_PREFIX) + b"*"


def namespace_of(key: bytes, cluster: bool, *, records: bool = False) -> bytes | None:
    """The namespace a genesis key (or with ``records`` a record key) of this layout
    names; ``None``: a key it would never write (on a Cluster, a tag not its namespace's)."""
    tag, _, body = key.partition(b"}")
    if body.startswith(GENESIS_PREFIX[2:]):
        name = body[len(GENESIS_PREFIX) - 2 :]
    elif records and body.startswith(RECORD_PREFIX[2:]):
        length, colon, tail = body[len(RECORD_PREFIX) - 2 :].partition(b":")
        if not colon or not length.isdigit() or tail[int(length) : int(length) + 1] != b":":
            return None
        name = tail[: int(length)]
    else:
        return None
    if not cluster:
        return name if tag == b"{" else None
    try:
        ours = cluster_tag(name.decode("utf-8"))
    except UnicodeDecodeError:
        return None
    return name if ours == tag + b"}" else None


def glob_escape(prefix: bytes) -> bytes:
    return re.sub(rb"([*?\[\]\\])", rb"\\\1", prefix)


# The identity proof of every spend and read, in its round trip. ARGV[1]: the genesis
# (32 hex digits), then (unless failover_may_lose_spends=accept) ":" and the epoch: empty
# with no replication backlog, else master_replid, which a promotion or restart
# replaces. INFO runs inside the script, atomically with the spend (effects replication
# first: Redis 3.2 - 4 refuse a write after INFO otherwise). A failure is an error reply,
# never a value that could pass for an answer.
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
# What open reads of replication, routed by the genesis key (the node every spend runs on).
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
# spend_as (C10): the value is token + 32-byte digest. The same attempt re-entering
# writes the stored value again, so a WAIT/WAITAOF in the same trip vouches for it.
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
# reidentify: a fresh genesis (ARGV[2]) over the one proven, in the same script.
REIDENTIFY_BODY = _PROVE_GENESIS + "redis.call('SET', KEYS[1], ARGV[2]) return 1"
# A listing page's proof, sent right AFTER its SCAN.
PROVE_BODY = _PROVE_GENESIS + "return 1"
SHEBANG = "#!lua\n"


@dataclass(frozen=True)
class Script:
    """One Lua script: sent as ``EVALSHA``, and as ``EVAL`` after ``NOSCRIPT``."""

    body: str

    @cached_property
    def sha(self) -> str:
        return hashlib.sha1(self.body.encode("utf-8")).hexdigest()


SCRIPTS = {
    s.sha: s
    for s in (
        Script(prefix + body)
        for body in (SPEND_BODY, SPEND_AS_BODY, READ_BODY)
        for prefix in ("", SHEBANG)
    )
}


def as_eval(commands: Sequence[Command]) -> list[Command]:
    """``EVALSHA`` as ``EVAL``: safe to resend, a ``NOSCRIPT`` reply means it did not run."""
    return [
        ("EVAL", SCRIPTS[c[1]].body, *c[2:]) if c[0] == "EVALSHA" and c[1] in SCRIPTS else c
        for c in commands
    ]


def _scripted(body: str) -> cached_property[Script]:
    return cached_property(lambda plan: Script((SHEBANG if plan.shebang else "") + body))


@dataclass(frozen=True)
class Plan:
    """The commands of a spend and a read, chosen once at open; ``wait`` is the
    ``WAIT``/``WAITAOF`` pipelined after a spend."""

    keys: Keys
    genesis: bytes
    epoch: bytes | None = None  # None: failover_may_lose_spends=accept (not proven)
    shebang: bool = True
    wait: Command | None = None
    probe_waitaof: bool = False

    @cached_property
    def proof(self) -> bytes:
        return self.genesis if self.epoch is None else self.genesis + b":" + self.epoch

    spend_script = _scripted(SPEND_BODY)
    spend_as_script = _scripted(SPEND_AS_BODY)
    read_script = _scripted(READ_BODY)

    @cached_property
    def proof_command(self) -> Command:
        body = (SHEBANG if self.shebang else "") + PROVE_BODY
        return ("EVAL", body, 1, self.keys.genesis, self.proof)

    def reidentify_commands(self, genesis: bytes) -> list[Command]:
        """The new ``genesis`` over the proven one, then the spend's ``WAIT``, if any."""
        body = (SHEBANG if self.shebang else "") + REIDENTIFY_BODY
        write: Command = ("EVAL", body, 1, self.keys.genesis, self.proof, genesis)
        return [write] if self.wait is None else [write, self.wait]


FACT_COMMANDS: list[Command] = [
    ("INFO",),
    ("CONFIG", "GET", "save"),
    ("CONFIG", "GET", "appendfsync"),
]


def pack(commands: Sequence[Command]) -> bytes:
    """``commands`` in RESP, in one buffer. redis-py's packer takes any type and splits
    large values; the ledger sends only bytes, ASCII text and ints, and this costs a third
    of it, which on a spent id is a tenth of the ledger's whole client path."""
    out = []
    for command in commands:
        out.append(b"*%d\r\n" % len(command))
        for arg in command:
            if type(arg) is str:
                arg = arg.encode("ascii")
            elif type(arg) is int:
                arg = b"%d" % arg
            elif type(arg) is not bytes:
                raise TypeError(f"cannot send a {type(arg).__name__} to Redis")
            out.append(b"$%d\r\n%b\r\n" % (len(arg), arg))
    return b"".join(out)


def epoch_command(keys: Keys) -> Command:
    return ("EVAL", EPOCH_BODY, 1, keys.genesis)


def scan_command(cursor: int, pattern: bytes, count: int) -> Command:
    return ("SCAN", cursor, "MATCH", pattern, "COUNT", count)


def plan_for(
    options: RedisOptions,
    version: tuple[int, ...] | None,
    *,
    cluster: bool,
    keys: Keys | None = None,
    genesis: bytes = b"",
) -> Plan:
    """An unknown ``version`` is never taken for an old one: ``WAITAOF`` is probed, and
    the ``#!lua`` shebang (a read-only replica then refuses reads too) is used."""
    if cluster and options.waits:
        raise InvalidLedgerURL(
            "wait_replicas / wait_aof are not available on Cluster ledgers: WAIT must "
            "run on the connection that wrote, which the Cluster client does not expose"
        )
    wait: Command | None = None
    timeout_ms = max(1, round(options.wait_timeout * 1000))
    if options.wait_aof:
        if version is not None and version < (7, 2):
            raise UnsafeStoreConfig(
                "option 'wait_aof' needs WAITAOF (Redis >= 7.2); the server runs "
                + ".".join(map(str, version))
            )
        wait = ("WAITAOF", 1, options.wait_replicas, timeout_ms)
    elif options.wait_replicas:
        wait = ("WAIT", options.wait_replicas, timeout_ms)
    return Plan(
        keys=keys or Keys("default"),
        genesis=genesis,
        shebang=version is None or version >= (7, 0),
        wait=wait,
        probe_waitaof=options.wait_aof and version is None,
    )
