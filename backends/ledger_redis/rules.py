"""The Redis ledger's rules, once: keys, commands, replies, errors, identity, safety.

The sync and async ledgers (and the standalone and Cluster transports under them) are
thin I/O shells over this module, so what a reply *means* is decided in one place.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ledger_core.errors import (
    AmbiguousSpend,
    InvalidLedgerURL,
    LedgerError,
    LedgerUnavailable,
    UnsafeStoreConfig,
)
from ledger_core.ids import ledger_key
from ledger_core.protocol import Durability, LedgerInfo
from ledger_core.tokens import attempt_outcome
from ledger_core.urls import option_bool, option_float

from .driver import redis_module

# Keys. Standalone: ``{}`` first is an empty hash tag (Cluster would hash the WHOLE
# key), kept as it always was so existing ledgers read the same keys. Cluster: every
# key of one namespace carries the hash tag ``{dl-<sha256(ns)[:16]>}``, so the genesis
# key and every record share one slot and ONE script proves the genesis and spends
# (a namespace then lives on one master: see docs/redis.md). Redis keys are
# binary-safe and never globbed by the commands used here, so the core's
# collision-free (namespace, id) encoding is used as is.
RECORD_PREFIX = b"{}dl:"
GENESIS_PREFIX = b"{}dl-genesis:"

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


def glob_escape(prefix: bytes) -> bytes:
    """``prefix`` for a ``SCAN ... MATCH`` pattern: the glob's special bytes escaped (a
    namespace may hold ``*``, ``?``, ``[``, ``\\``)."""
    return re.sub(rb"([*?\[\]\\])", rb"\\\1", prefix)


def store_id(kind: str, genesis: bytes, namespace: str) -> str:
    # The genesis value is 32 hex digits: everything after it is the namespace.
    return f"{kind}:{genesis.decode('ascii')}:{namespace}"


GENESIS_PATTERN = re.compile(rb"[0-9a-f]{32}\Z")

# The genesis proof every spend and read makes in its own round trip (KEYS[1] is the
# genesis key, ARGV[1] the value this ledger opened with). An error reply, never a
# value, so no reply can be mistaken for an answer.
IDENTITY_ERROR = "LEDGER_IDENTITY"
_PROVE_GENESIS = (
    "local g = redis.call('GET', KEYS[1]) "
    "if g ~= ARGV[1] then "
    "if g then return redis.error_reply('" + IDENTITY_ERROR + " changed') end "
    "return redis.error_reply('" + IDENTITY_ERROR + " gone') end "
)
# spend: SET NX GET in Lua, behind the genesis proof. nil: written now by us; a value:
# whose token is stored (ours after a lost reply, or someone else's).
SPEND_BODY = (
    _PROVE_GENESIS + "local v = redis.call('GET', KEYS[2]) "
    "if v then return v end "
    "redis.call('SET', KEYS[2], ARGV[2]) "
    "return false"
)
# is_spent: declared WITHOUT the no-writes flag (Redis >= 7), so a read-only replica
# refuses it (READONLY) in the same round trip: reads follow the spends' rule.
READ_BODY = _PROVE_GENESIS + "return redis.call('EXISTS', KEYS[2])"
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
        Script(body) for body in (SPEND_BODY, READ_BODY, SHEBANG + SPEND_BODY, SHEBANG + READ_BODY)
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


# ---------------------------------------------------------------- options

DEFAULT_TIMEOUT = 5.0
DEFAULT_WAIT_TIMEOUT = 1.0
# How often (at most) the configuration that decides durability and identity is read
# again, piggybacked on an operation (docs/redis.md: the re-check period).
DEFAULT_RECHECK = 5.0
DURABILITY_CHOICES = {
    "machine": Durability.MACHINE,
    "process": Durability.PROCESS,
    Durability.MACHINE: Durability.MACHINE,  # the values describe() shows
    Durability.PROCESS: Durability.PROCESS,
}

# Options this backend owns; they are stripped from the URL before redis-py sees it.
LEDGER_OPTIONS = frozenset(
    {
        "namespace",
        "timeout",
        "connect_timeout",
        "wait_replicas",
        "wait_aof",
        "wait_timeout",
        "trust_config",
        "require_aof",
        "durability",
        "create",
        "recheck_interval",
    }
)
# Driver options allowed in the URL query (redis-py parses them from the URL).
DRIVER_URL_OPTIONS = frozenset(
    {
        "db",
        "client_name",
        "max_connections",
        "ssl_cert_reqs",
        "ssl_ca_certs",
        "ssl_certfile",
        "ssl_keyfile",
        "ssl_check_hostname",
    }
)


@dataclass(frozen=True)
class RedisOptions:
    """What a ledger may be asked to do beyond the defaults; validated before any I/O."""

    timeout: float = DEFAULT_TIMEOUT
    connect_timeout: float = DEFAULT_TIMEOUT
    wait_replicas: int = 0
    wait_aof: bool = False
    wait_timeout: float = DEFAULT_WAIT_TIMEOUT
    trust_config: bool = False
    require_aof: bool = False
    durability: str = Durability.MACHINE
    create: bool = True
    recheck_interval: float = DEFAULT_RECHECK

    def __post_init__(self) -> None:
        for name in ("timeout", "connect_timeout", "wait_timeout"):
            value = getattr(self, name)
            if not value > 0:
                raise InvalidLedgerURL(f"option {name!r} must be a positive number of seconds")
        if self.wait_replicas < 0:
            raise InvalidLedgerURL("option 'wait_replicas' must be 0 or more")
        if self.waits and self.wait_timeout >= self.timeout:
            raise InvalidLedgerURL(
                "option 'wait_timeout' must be shorter than 'timeout', or the socket "
                "would give up before the server answers"
            )

    @property
    def waits(self) -> bool:
        return self.wait_replicas > 0 or self.wait_aof

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any]) -> RedisOptions:
        level = options.get("durability", "machine")
        if level not in DURABILITY_CHOICES:
            raise InvalidLedgerURL(
                f"option 'durability' must be 'machine' (the default) or 'process', not {level!r}"
            )
        replicas = options.get("wait_replicas", 0)
        try:
            wait_replicas = int(replicas)
        except (TypeError, ValueError):
            raise InvalidLedgerURL(
                f"option 'wait_replicas' must be an integer, not {replicas!r}"
            ) from None
        return cls(
            timeout=option_float(options, "timeout", DEFAULT_TIMEOUT),
            connect_timeout=option_float(options, "connect_timeout", DEFAULT_TIMEOUT),
            wait_replicas=wait_replicas,
            wait_aof=option_bool(options, "wait_aof", False),
            wait_timeout=option_float(options, "wait_timeout", DEFAULT_WAIT_TIMEOUT),
            trust_config=option_bool(options, "trust_config", False),
            require_aof=option_bool(options, "require_aof", False),
            durability=DURABILITY_CHOICES[level],
            create=option_bool(options, "create", True),
            recheck_interval=option_float(options, "recheck_interval", DEFAULT_RECHECK),
        )


# ---------------------------------------------------------------- errors


class ReplyLost(LedgerUnavailable):
    """A command was (maybe) sent and its reply never came: its effect is unknown.

    For a read this is just unavailability; a spend resolves it (C5).
    """


class IdentityLost(UnsafeStoreConfig):
    """The namespace's genesis is gone or different since this ledger opened: the store
    forgot (``FLUSHALL``, eviction, a restore). The ledger stays failed; reopen."""


FORGOT = (
    "the store forgot: its identity (genesis key) is {how} since this ledger opened "
    "(FLUSHALL, eviction, a restore or failover that lost it); spent ids may be gone, so "
    "this ledger stays failed closed: reopen (a new instance gets a new store_id)"
)


def driver_error(exc: BaseException, what: str, *, sent: bool) -> LedgerError:
    """Map one redis-py exception to the ledger's error tree (C4).

    ``sent`` says whether the command may have reached the server: a connection that
    failed before sending is plain unavailability, one that failed after is
    :class:`ReplyLost`. A server error reply means the command did not apply.
    """
    exceptions = redis_module().exceptions
    if isinstance(exc, exceptions.MaxConnectionsError):
        # The client's pool was exhausted: no connection, so nothing was sent.
        return LedgerUnavailable(f"{what}: no free connection in the client's pool")
    if isinstance(exc, exceptions.ReadOnlyError):
        return UnsafeStoreConfig(f"{what}: the server is a read-only replica ({exc})")
    if isinstance(exc, exceptions.ResponseError):
        text = str(exc)
        if text.startswith(IDENTITY_ERROR):
            how = "gone" if "gone" in text else "different"
            return IdentityLost(f"{what}: " + FORGOT.format(how=how))
        if text.startswith("WRONGTYPE"):
            return UnsafeStoreConfig(
                f"{what}: a ledger key holds a value of the wrong type (something else "
                "wrote it); refusing to guess"
            )
        if text.startswith(("MOVED", "ASK", "CROSSSLOT", "CLUSTERDOWN")):
            return LedgerUnavailable(f"{what}: refused by a Cluster node ({text})")
        return LedgerUnavailable(f"{what}: the server refused it ({text})")
    if isinstance(exc, exceptions.AuthenticationError | exceptions.AuthorizationError):
        return LedgerUnavailable(f"{what}: authentication failed ({type(exc).__name__})")
    # Anything else (connection loss, timeouts, the Cluster client giving up, or an
    # error nobody foresaw): after sending, the outcome is unknown.
    if sent:
        return ReplyLost(f"{what}: no reply ({type(exc).__name__}: {exc})")
    return LedgerUnavailable(f"{what}: cannot reach the server ({type(exc).__name__}: {exc})")


def io_errors() -> tuple[type[BaseException], ...]:
    """What a transport catches around one exchange: every ``Exception``, since redis-py
    raises some outside ``RedisError`` (``RedisClusterException``), and a ledger must
    never leak a raw driver error (C4). ``BaseException`` (cancellation) passes."""
    return (Exception,)


# ---------------------------------------------------------------- spend plan


@dataclass(frozen=True)
class SpendPlan:
    """The commands of a spend and of a read, chosen once at open, and what their
    replies prove.

    Both are one Lua script (``EVALSHA``; ``EVAL`` after ``NOSCRIPT``) that first proves
    the namespace's genesis is the one this ledger opened with, then acts, in the same
    round trip. The spend script is ``SET NX GET`` in Lua, so a resend (ours after a
    lost reply, or a Cluster client's) finds its own token. ``shebang`` declares the
    scripts for Redis >= 7 (an unknown version counts as 7: a refusal then fails
    closed), which makes a read-only replica refuse reads too.
    """

    keys: Keys
    genesis: bytes
    shebang: bool = True
    wait: Command | None = None
    probe_waitaof: bool = False

    @classmethod
    def build(
        cls,
        options: RedisOptions,
        version: tuple[int, ...] | None,
        *,
        driver_retries: bool,
        keys: Keys | None = None,
        genesis: bytes = b"",
    ) -> SpendPlan:
        """``version`` is ``None`` when the server would not say (ACL without INFO):
        unknown is never taken for an old server; what depends on it is asked of the
        server itself (``probe_waitaof``) or fails closed on its refusal."""
        if driver_retries and options.waits:
            raise InvalidLedgerURL(
                "wait_replicas / wait_aof are not available on Cluster ledgers: WAIT must "
                "run on the connection that wrote, which the Cluster client does not expose"
            )
        wait: Command | None = None
        probe = False
        timeout_ms = max(1, round(options.wait_timeout * 1000))
        if options.wait_aof:
            if version is not None and version < (7, 2):
                raise UnsafeStoreConfig(
                    "option 'wait_aof' needs WAITAOF (Redis >= 7.2); the server runs "
                    + ".".join(map(str, version))
                )
            probe = version is None
            wait = ("WAITAOF", 1, options.wait_replicas, timeout_ms)
        elif options.wait_replicas:
            wait = ("WAIT", options.wait_replicas, timeout_ms)
        return cls(
            keys=keys or Keys("default"),
            genesis=genesis,
            shebang=version is None or version >= (7, 0),
            wait=wait,
            probe_waitaof=probe,
        )

    @cached_property
    def spend_script(self) -> Script:
        return Script((SHEBANG if self.shebang else "") + SPEND_BODY)

    @cached_property
    def read_script(self) -> Script:
        return Script((SHEBANG if self.shebang else "") + READ_BODY)

    def spend_commands(self, request_id: bytes, token: bytes) -> list[Command]:
        """One trip: the genesis-proving ``SET NX GET`` script (and ``WAIT``)."""
        key = self.keys.record(request_id)
        first = self.spend_script.evalsha(self.keys.genesis, key, self.genesis, token)
        return [first] if self.wait is None else [first, self.wait]

    # After a lost reply the same script with the same token settles it (C5).
    resolve_commands = spend_commands

    def read_commands(self, request_id: bytes) -> list[Command]:
        key = self.keys.record(request_id)
        return [self.read_script.evalsha(self.keys.genesis, key, self.genesis)]

    def spend_outcome(self, replies: Sequence[Any], token: bytes) -> bool:
        """What the first trip's replies prove: ``True`` only if our write landed."""
        won = _set_get_reply(replies[0], token)
        if won:
            self._check_ack(replies)
        return won

    def resolve_outcome(self, replies: Sequence[Any], token: bytes, failure: BaseException) -> bool:
        """After a lost reply: did the retry find our token, a foreign one, or none?"""
        stored = replies[0]
        won = _set_get_reply(stored, token)
        if won and self.wait is not None and stored is not None:
            # Our write landed on the lost connection; WAIT counts only the writes of
            # the connection it runs on, so it cannot vouch for that one.
            raise AmbiguousSpend(
                "the spend landed (its attempt token is stored) after a lost reply, but "
                "its replication cannot be confirmed from another connection"
            ) from failure
        if won:
            self._check_ack(replies)
        return won

    def spend_many_commands(
        self, request_ids: Sequence[bytes], tokens: Sequence[bytes]
    ) -> list[Command]:
        """One trip: the spend script per id (a token each, so a repeat within the
        batch finds its first copy's token: ``False``), then one ``WAIT`` for all."""
        out = [
            self.spend_script.evalsha(self.keys.genesis, self.keys.record(rid), self.genesis, tok)
            for rid, tok in zip(request_ids, tokens, strict=True)
        ]
        return out if self.wait is None else [*out, self.wait]

    def spend_many_outcome(
        self,
        replies: Sequence[Any],
        tokens: Sequence[bytes],
        failure: BaseException | None = None,
    ) -> list[bool]:
        """Per id, what its script's reply proves; any error reply raises (the batch's
        other outcomes are then unknown to the caller: fail closed)."""
        stored = replies[: len(tokens)]
        for reply in stored:
            if isinstance(reply, Exception):
                raise driver_error(reply, "spend_many", sent=True) from reply
        won = [_set_get_reply(r, tok) for r, tok in zip(stored, tokens, strict=True)]
        landed = any(w and r is not None for w, r in zip(won, stored, strict=True))
        if failure is not None and self.wait is not None and landed:
            raise AmbiguousSpend(
                "a batch landed (attempt tokens stored) after a lost reply, but its "
                "replication cannot be confirmed from another connection"
            ) from failure
        if any(won):
            self._check_ack([None, replies[-1]] if self.wait is not None else replies)
        return won

    def _check_ack(self, replies: Sequence[Any]) -> None:
        if self.wait is None:
            return
        ack = replies[1]
        if isinstance(ack, Exception):
            raise AmbiguousSpend(
                f"the spend was recorded on the primary but {self.wait[0]} failed ({ack}): "
                "it is not proof"
            ) from ack
        try:
            if self.wait[0] == "WAITAOF":
                local, replicas = (int(x) for x in ack)
                if local >= 1 and replicas >= self.wait[2]:
                    return
                got = f"local fsync {local}, replicas {replicas} of {self.wait[2]}"
            else:
                if int(ack) >= self.wait[1]:
                    return
                got = f"{int(ack)} of {self.wait[1]} replicas"
        except (TypeError, ValueError) as exc:
            raise AmbiguousSpend(
                f"the spend was recorded on the primary but {self.wait[0]} answered "
                f"{type(ack).__name__}: it is not proof"
            ) from exc
        raise AmbiguousSpend(
            f"the spend was recorded on the primary but acknowledged by {got} within "
            f"{self.wait[-1]} ms: it could be lost on a failover, so it is not proof"
        )


def _set_get_reply(reply: Any, token: bytes) -> bool:
    """``SET NX GET``: nil means it was absent and we wrote it; else compare tokens."""
    if reply is None:
        return True
    if not isinstance(reply, bytes):
        raise LedgerUnavailable(f"unexpected SET NX GET reply of type {type(reply).__name__}")
    outcome = attempt_outcome(reply, token)
    return bool(outcome)


def exists_reply(reply: Any) -> bool:
    if reply in (1, True):
        return True
    if reply in (0, False):
        return False
    raise LedgerUnavailable(f"unexpected EXISTS reply {reply!r}")


# ---------------------------------------------------------------- server facts


@dataclass(frozen=True)
class ServerFacts:
    """What one server says about itself: read at open, judged by :func:`assess`."""

    node: str
    version: tuple[int, ...] | None = None  # None: the server would not say
    role: str | None = None
    cluster_enabled: bool = False
    maxmemory_policy: str | None = None
    aof_enabled: bool | None = None
    save: str | None = None
    appendfsync: str | None = None
    info_error: str | None = None
    config_error: str | None = None
    notes: tuple[str, ...] = field(default=())


def parse_info(reply: Any) -> dict[str, str]:
    """``INFO`` as a flat dict, whether redis-py parsed it already or not."""
    if isinstance(reply, Mapping):
        return {str(k): str(v) for k, v in reply.items()}
    text = reply.decode("utf-8", "replace") if isinstance(reply, bytes) else str(reply)
    out: dict[str, str] = {}
    for line in text.splitlines():
        if line and not line.startswith("#") and ":" in line:
            name, _, value = line.partition(":")
            out[name.strip()] = value.strip()
    return out


def parse_config(reply: Any) -> dict[str, str]:
    """``CONFIG GET`` as a dict (RESP2 gives a flat list, RESP3 or redis-py a map)."""

    def text(value: Any) -> str:
        return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)

    if isinstance(reply, Mapping):
        return {text(k): text(v) for k, v in reply.items()}
    items = list(reply)
    return {text(items[i]): text(items[i + 1]) for i in range(0, len(items) - 1, 2)}


def parse_version(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split("."):
        digits = re.match(r"\d+", piece)
        parts.append(int(digits.group()) if digits else 0)
    return tuple(parts) or (0,)


CONFIG_KEYS = ("save", "appendfsync")


def facts_from(
    node: str,
    info: Any,
    config: Any,
    *,
    info_error: BaseException | None = None,
    config_error: BaseException | None = None,
) -> ServerFacts:
    """Build :class:`ServerFacts` from raw ``INFO`` and ``CONFIG GET`` replies."""
    i = parse_info(info) if info_error is None else {}
    c = parse_config(config) if config_error is None else {}
    aof = i.get("aof_enabled")
    return ServerFacts(
        node=node,
        version=parse_version(i["redis_version"]) if "redis_version" in i else None,
        role=i.get("role"),
        cluster_enabled=i.get("cluster_enabled") == "1",
        maxmemory_policy=i.get("maxmemory_policy"),
        aof_enabled=None if aof is None else aof == "1",
        save=c.get("save"),
        appendfsync=c.get("appendfsync"),
        info_error=None if info_error is None else _short(info_error),
        config_error=None if config_error is None else _short(config_error),
    )


def _unknown(facts: ServerFacts, options: RedisOptions) -> list[str]:
    unknown = []
    if facts.role is None:
        unknown.append("the role")
    if facts.maxmemory_policy is None:
        unknown.append("maxmemory-policy")
    if facts.aof_enabled is None:
        unknown.append("the persistence settings")
    elif offered(facts, options) is None:
        unknown.append("appendfsync")
    return unknown


def _short(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:200]


_RANK = {Durability.NONE: 0, Durability.PROCESS: 1, Durability.MACHINE: 2}


def offered(facts: ServerFacts, options: RedisOptions) -> str | None:
    """What an acknowledged spend survives on this server; ``None``: unknown.

    With ``appendfsync no`` Redis writes the AOF (``write(2)``) before it sends the
    reply, so the spend is in the OS page cache: it survives kill -9 of the server, not
    a power loss. With ``appendfsync everysec`` it does not even survive kill -9: while
    a background fsync is still running, Redis postpones that write for up to 2 s and
    replies anyway (``flushAppendOnlyFile``), and a spend acknowledged then was seen
    lost after kill -9 under load. Only ``appendfsync always`` (or ``WAITAOF`` with
    ``numlocal=1`` on each spend) has it on disk first. Snapshots only: a crash loses
    every spend since the last snapshot.
    """
    if facts.aof_enabled is False:
        return Durability.NONE
    if facts.aof_enabled is None:
        return None
    if facts.appendfsync == "always" or options.wait_aof:
        return Durability.MACHINE
    if facts.appendfsync is None:
        return None
    if facts.appendfsync == "everysec":
        return Durability.NONE
    return Durability.PROCESS


def assess(facts: ServerFacts, options: RedisOptions) -> tuple[str | None, list[str], str | None]:
    """Whether this server can forget (C2): ``(reason or None, notes, durability)``.

    What the server shows is believed over any option: ``trust_config`` only fills in
    what could not be read (``CONFIG`` blocked on a managed service), it never
    overrides an ``allkeys-*`` policy, a replica role or a persistence setting the
    server reports. ``durability`` is what the server offers (``None``: unknown).
    """
    notes: list[str] = []
    where = facts.node
    level = offered(facts, options)
    if facts.role is not None and facts.role != "master":
        return f"{where} is a replica (role {facts.role}): its data is a copy", notes, level
    policy = facts.maxmemory_policy
    if policy is not None and policy.startswith("allkeys-"):
        return (
            f"{where} has maxmemory-policy {policy}: it may evict spent ids under memory "
            "pressure (use noeviction or a volatile-* policy)",
            notes,
            level,
        )
    if level == Durability.NONE and facts.aof_enabled:  # appendfsync everysec
        return (
            f"{where} has appendfsync everysec: while a background fsync runs, Redis "
            "postpones writing the append-only file for up to 2 s and still replies, so a "
            "crash of the server (kill -9) can lose acknowledged spends; use appendfsync "
            "always (or wait_aof=true on Redis >= 7.2)",
            notes,
            level,
        )
    if level == Durability.NONE:
        if facts.save == "":
            what = 'no persistence (appendonly no, save ""): a restart forgets every spent id'
        else:
            what = (
                f"snapshots only (appendonly no, save {facts.save!r}): a crash of the server "
                "(kill -9) loses every spend since the last snapshot"
            )
        return f"{where} has {what}; use appendonly yes with appendfsync always", notes, level
    if options.require_aof and facts.appendfsync not in (None, "always"):
        return (
            f"{where} has appendfsync {facts.appendfsync} and require_aof is set: a crash "
            "may lose the last writes",
            notes,
            level,
        )
    unknown = _unknown(facts, options)
    if unknown:
        blocked = "; ".join(e for e in (facts.info_error, facts.config_error) if e)
        what = f"cannot read {', '.join(unknown)}" + (f" ({blocked})" if blocked else "")
        if not options.trust_config:
            return (
                f"{where}: {what}; if the server persists (appendonly yes, appendfsync "
                "always) and never evicts, assert it with trust_config=true",
                notes,
                level,
            )
        notes.append(f"{where}: {what}; asserted safe by trust_config")
        if level is None:
            level = options.durability
    if level is not None and _RANK[level] < _RANK[options.durability]:
        return (
            f"{where} has appendfsync {facts.appendfsync}: an acknowledged spend survives a "
            "crash of the server process but may be lost with its machine (power loss); "
            "use appendfsync always, or accept it with durability=process",
            notes,
            level,
        )
    if facts.aof_enabled and facts.appendfsync not in (None, "always"):
        if options.wait_aof:
            notes.append(f"{where}: appendfsync {facts.appendfsync}; WAITAOF fsyncs each spend")
        else:
            notes.append(
                f"{where}: appendfsync {facts.appendfsync}: a spend survives a server crash "
                "(kill -9), not a machine crash (durability=process)"
            )
    return None, notes, level


# ---------------------------------------------------------------- opening


def new_genesis() -> bytes:
    """A fresh random identity; only the first opener's ``SET NX`` keeps its own."""
    return os.urandom(16).hex().encode("ascii")


def check_topology(facts: Sequence[ServerFacts], options: RedisOptions, *, cluster: bool) -> None:
    """Refuse what cannot work: a standalone URL on a Cluster node (``MOVED`` for most
    keys), or ``wait_aof`` on a server without an append-only file."""
    if options.wait_aof and any(f.aof_enabled is False for f in facts):
        raise UnsafeStoreConfig("option 'wait_aof' needs appendonly yes on the server")
    if not cluster and any(f.cluster_enabled for f in facts):
        raise InvalidLedgerURL(
            "the server runs in Cluster mode: open it with redis+cluster:// "
            "(or give the ledger a redis-py RedisCluster client)"
        )


def server_version(facts: Sequence[ServerFacts]) -> tuple[int, ...] | None:
    """The oldest version among the servers (the commands must work on all); ``None``
    when any server would not say: unknown, never zero."""
    versions = [f.version for f in facts]
    if not versions or any(v is None for v in versions):
        return None
    return min(v for v in versions if v is not None)


@dataclass(frozen=True)
class Verdict:
    """Whether the servers behind a ledger can forget (``reason``), caveats, and what
    an acknowledged spend survives on the weakest of them."""

    reason: str | None
    notes: tuple[str, ...]
    durability: str = Durability.NONE


def judge(facts: Sequence[ServerFacts], options: RedisOptions) -> Verdict:
    reasons: list[str] = []
    notes: list[str] = []
    levels: list[str] = []
    for one in facts:
        reason, more, level = assess(one, options)
        notes.extend(more)
        levels.append(Durability.NONE if level is None else level)
        if reason is not None:
            reasons.append(reason)
    weakest = min(levels, key=_RANK.__getitem__) if levels else Durability.NONE
    return Verdict("; ".join(reasons) or None, tuple(notes), weakest)


def changed_since_open(info: LedgerInfo, verdict: Verdict) -> UnsafeStoreConfig | None:
    """The periodic re-check: a proving ledger whose store can now forget fails closed
    (and stays failed); a ledger that never proved has nothing to withdraw."""
    if info.store_id is None or verdict.reason is None:
        return None
    return UnsafeStoreConfig(
        f"the store's configuration changed since this ledger opened: {verdict.reason}; "
        "this ledger stays failed closed: reopen"
    )


class Recheck:
    """When the configuration is read again: at most once per ``period`` seconds,
    lazily, by the first operation after the period (no thread, fork-safe)."""

    def __init__(self, period: float, now: float | None = None) -> None:
        self.period = period
        self._next = (time.monotonic() if now is None else now) + period

    def due(self, now: float | None = None) -> bool:
        """Whether this caller runs the check (and claims it for this period)."""
        now = time.monotonic() if now is None else now
        if now < self._next:
            return False
        self._next = now + self.period
        return True

    def failed(self) -> None:
        """The check itself could not run: the next operation tries again."""
        self._next = 0.0


def ledger_info(
    *,
    kind: str,
    location: str,
    namespace: str,
    genesis: bytes | None,
    verdict: Verdict,
    keys: Keys | None = None,
) -> LedgerInfo:
    """The ledger's identity (C6) and whether it may prove, decided once at open.

    ``genesis`` is ``None`` when the verdict already forbids proving (a replica cannot
    even write one).
    """
    name = (keys or Keys(namespace)).genesis
    if genesis is not None and not GENESIS_PATTERN.match(genesis):
        raise UnsafeStoreConfig(
            f"key {name!r} does not hold a ledger identity: something else wrote it; "
            "refusing to guess"
        )
    identity = (
        f"random genesis value in key {name.decode()!r}, set with "
        "SET NX by the first opener (a copy of the data set carries it: move a ledger "
        "with migrate)"
    )
    if verdict.notes:
        identity += "; " + "; ".join(verdict.notes)
    identity += (
        "; every spend and read proves the genesis in the same round trip (one script); "
        "the configuration is re-checked at most every recheck_interval seconds"
    )
    proves = genesis is not None and verdict.reason is None
    reason = verdict.reason
    if proves and verdict.durability == Durability.PROCESS:
        reason = (
            "durability=process accepted: an acknowledged spend survives a crash of the "
            "server process, not necessarily of its machine (" + "; ".join(verdict.notes) + ")"
        )
    if genesis is None and reason is None:
        reason = "no genesis could be read or written on this server"
    return LedgerInfo(
        backend=kind,
        store_id=store_id(kind, genesis, namespace) if proves and genesis else None,
        reason=reason,
        location=location,
        namespace=namespace,
        identity=identity,
        durability=verdict.durability,
    )


def ambiguous(failure: BaseException, retry_error: BaseException) -> AmbiguousSpend:
    return AmbiguousSpend(
        f"the spend's reply was lost ({failure}) and re-reading its token failed "
        f"({retry_error}): it may or may not be recorded"
    )
