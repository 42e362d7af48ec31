"""The Redis ledger's rules, once: keys, commands, replies, errors, identity, safety.

The sync and async ledgers (and the standalone and Cluster transports under them) are
thin I/O shells over this module, so what a reply *means* is decided in one place.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ledger_core.errors import (
    AmbiguousSpend,
    InvalidLedgerURL,
    LedgerError,
    LedgerUnavailable,
    UnsafeStoreConfig,
)
from ledger_core.ids import ledger_key
from ledger_core.protocol import LedgerInfo
from ledger_core.tokens import attempt_outcome
from ledger_core.urls import option_bool, option_float

from .driver import redis_module

# Keys. ``{}`` first is an empty hash tag: Cluster then hashes the WHOLE key, so a
# ``{tag}`` inside an id is data, never a slot choice, and ids spread over all slots.
# Redis keys are binary-safe and never globbed by the commands used here, so the
# core's collision-free (namespace, id) encoding is used as is.
RECORD_PREFIX = b"{}dl:"
GENESIS_PREFIX = b"{}dl-genesis:"

Command = tuple[Any, ...]


def record_key(namespace: str, request_id: bytes) -> bytes:
    """The key of one spent id: ``{}dl:<len(ns)>:<ns>:<id>`` (C7, C8)."""
    return RECORD_PREFIX + ledger_key(namespace, request_id)


def genesis_key(namespace: str) -> bytes:
    """The key holding the random identity of one namespace (C6)."""
    return GENESIS_PREFIX + namespace.encode("utf-8")


def store_id(kind: str, genesis: bytes, namespace: str) -> str:
    # The genesis value is 32 hex digits: everything after it is the namespace.
    return f"{kind}:{genesis.decode('ascii')}:{namespace}"


GENESIS_PATTERN = re.compile(rb"[0-9a-f]{32}\Z")

# Before Redis 7, SET cannot combine NX and GET; this script does the same in one trip.
RESOLVE_SCRIPT = (
    "local v = redis.call('GET', KEYS[1]) "
    "if v then return v end "
    "redis.call('SET', KEYS[1], ARGV[1]) "
    "return false"
)


# ---------------------------------------------------------------- options

DEFAULT_TIMEOUT = 5.0
DEFAULT_WAIT_TIMEOUT = 1.0

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
        )


# ---------------------------------------------------------------- errors


class ReplyLost(LedgerUnavailable):
    """A command was (maybe) sent and its reply never came: its effect is unknown.

    For a read this is just unavailability; a spend resolves it (C5).
    """


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
    """The commands of a spend, chosen once at open, and what their replies prove.

    ``first_setnx``: the first trip is ``SETNX`` (the cheapest command) when nothing
    between us and the server resends a command; a client that retries on its own
    (redis-py's Cluster client) gets ``SET NX GET``, whose every resend finds its own
    token. The resolving trip after a lost reply is always ``SET NX GET`` (or the same
    in Lua before Redis 7): one round trip that both writes and tells whose token it is.
    """

    first_setnx: bool = True
    set_nx_get: bool = True  # Redis >= 7
    wait: Command | None = None

    @classmethod
    def build(
        cls, options: RedisOptions, version: tuple[int, ...], *, driver_retries: bool
    ) -> SpendPlan:
        set_nx_get = version >= (7, 0)
        if driver_retries and options.waits:
            raise InvalidLedgerURL(
                "wait_replicas / wait_aof are not available on Cluster ledgers: WAIT must "
                "run on the connection that wrote, which the Cluster client does not expose"
            )
        if driver_retries and not set_nx_get:
            raise UnsafeStoreConfig(
                "this client resends commands on its own and the server predates Redis 7 "
                "(no SET NX GET): give the ledger a client with retries disabled"
            )
        wait: Command | None = None
        timeout_ms = max(1, round(options.wait_timeout * 1000))
        if options.wait_aof:
            if version < (7, 2):
                raise UnsafeStoreConfig(
                    "option 'wait_aof' needs WAITAOF (Redis >= 7.2); the server runs "
                    + ".".join(map(str, version))
                )
            wait = ("WAITAOF", 1, options.wait_replicas, timeout_ms)
        elif options.wait_replicas:
            wait = ("WAIT", options.wait_replicas, timeout_ms)
        return cls(first_setnx=not driver_retries, set_nx_get=set_nx_get, wait=wait)

    def resolve_command(self, key: bytes, token: bytes) -> Command:
        if self.set_nx_get:
            return ("SET", key, token, "NX", "GET")
        return ("EVAL", RESOLVE_SCRIPT, 1, key, token)

    def spend_commands(self, key: bytes, token: bytes) -> list[Command]:
        first = ("SETNX", key, token) if self.first_setnx else self.resolve_command(key, token)
        return [first] if self.wait is None else [first, self.wait]

    def resolve_commands(self, key: bytes, token: bytes) -> list[Command]:
        command = self.resolve_command(key, token)
        return [command] if self.wait is None else [command, self.wait]

    def spend_outcome(self, replies: Sequence[Any], token: bytes) -> bool:
        """What the first trip's replies prove: ``True`` only if our write landed."""
        first = replies[0]
        won = _setnx_reply(first) if self.first_setnx else _set_get_reply(first, token)
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

    def _check_ack(self, replies: Sequence[Any]) -> None:
        if self.wait is None:
            return
        ack = replies[1]
        if isinstance(ack, Exception):
            raise AmbiguousSpend(
                f"the spend was recorded on the primary but {self.wait[0]} failed ({ack}): "
                "it is not proof"
            ) from ack
        if self.wait[0] == "WAITAOF":
            local, replicas = (int(x) for x in ack)
            if local >= 1 and replicas >= self.wait[2]:
                return
            got = f"local fsync {local}, replicas {replicas} of {self.wait[2]}"
        else:
            if int(ack) >= self.wait[1]:
                return
            got = f"{int(ack)} of {self.wait[1]} replicas"
        raise AmbiguousSpend(
            f"the spend was recorded on the primary but acknowledged by {got} within "
            f"{self.wait[-1]} ms: it could be lost on a failover, so it is not proof"
        )


def _setnx_reply(reply: Any) -> bool:
    if reply in (1, True):
        return True
    if reply in (0, False):
        return False
    raise LedgerUnavailable(f"unexpected SETNX reply {reply!r}")


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
    version: tuple[int, ...] = (0,)
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
        version=parse_version(i.get("redis_version", "0")),
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
    if facts.aof_enabled is not True and facts.save is None:
        unknown.append("the persistence settings")
    elif options.require_aof and facts.aof_enabled and facts.appendfsync is None:
        unknown.append("appendfsync")
    return unknown


def _short(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:200]


def assess(facts: ServerFacts, options: RedisOptions) -> tuple[str | None, list[str]]:
    """Whether this server can forget (C2): ``(reason or None, notes)``.

    What the server shows is believed over any option: ``trust_config`` only fills in
    what could not be read (``CONFIG`` blocked on a managed service), it never
    overrides an ``allkeys-*`` policy or a replica role the server reports.
    """
    notes: list[str] = []
    where = facts.node
    if facts.role is not None and facts.role != "master":
        return f"{where} is a replica (role {facts.role}): its data is a copy", notes
    policy = facts.maxmemory_policy
    if policy is not None and policy.startswith("allkeys-"):
        return (
            f"{where} has maxmemory-policy {policy}: it may evict spent ids under memory "
            "pressure (use noeviction or a volatile-* policy)",
            notes,
        )
    if facts.aof_enabled is False and facts.save == "":
        return (
            f'{where} has no persistence (appendonly no, save ""): a restart forgets '
            "every spent id",
            notes,
        )
    if options.require_aof and facts.aof_enabled is False:
        return f"{where} has appendonly no and require_aof is set", notes
    if options.require_aof and facts.aof_enabled and facts.appendfsync not in (None, "always"):
        return (
            f"{where} has appendfsync {facts.appendfsync} and require_aof is set: a crash "
            "may lose the last writes",
            notes,
        )
    unknown = _unknown(facts, options)
    if unknown:
        blocked = "; ".join(e for e in (facts.info_error, facts.config_error) if e)
        what = f"cannot read {', '.join(unknown)}" + (f" ({blocked})" if blocked else "")
        if not options.trust_config:
            return (
                f"{where}: {what}; if the server persists and never evicts, assert it "
                "with trust_config=true",
                notes,
            )
        notes.append(f"{where}: {what}; asserted safe by trust_config")
    if facts.aof_enabled is not True and facts.save not in (None, ""):
        notes.append(
            f"{where}: RDB snapshots only (save {facts.save!r}): a crash loses spends since "
            "the last snapshot; appendonly yes with appendfsync always keeps them"
        )
    elif facts.aof_enabled and facts.appendfsync not in (None, "always"):
        notes.append(f"{where}: appendfsync {facts.appendfsync}: a crash may lose the last second")
    return None, notes


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


def server_version(facts: Sequence[ServerFacts]) -> tuple[int, ...]:
    """The oldest version among the servers (the commands must work on all)."""
    return min(f.version for f in facts)


@dataclass(frozen=True)
class Verdict:
    """Whether the servers behind a ledger can forget (``reason``), and caveats."""

    reason: str | None
    notes: tuple[str, ...]


def judge(facts: Sequence[ServerFacts], options: RedisOptions) -> Verdict:
    reasons: list[str] = []
    notes: list[str] = []
    for one in facts:
        reason, more = assess(one, options)
        notes.extend(more)
        if reason is not None:
            reasons.append(reason)
    return Verdict("; ".join(reasons) or None, tuple(notes))


def ledger_info(
    *,
    kind: str,
    location: str,
    namespace: str,
    genesis: bytes | None,
    verdict: Verdict,
) -> LedgerInfo:
    """The ledger's identity (C6) and whether it may prove, decided once at open.

    ``genesis`` is ``None`` when the verdict already forbids proving (a replica cannot
    even write one).
    """
    if genesis is not None and not GENESIS_PATTERN.match(genesis):
        raise UnsafeStoreConfig(
            f"key {genesis_key(namespace)!r} does not hold a ledger identity: "
            "something else wrote it; refusing to guess"
        )
    identity = (
        f"random genesis value in key {genesis_key(namespace).decode()!r}, set with "
        "SET NX by the first opener (a copy of the data set carries it: move a ledger "
        "with migrate)"
    )
    if verdict.notes:
        identity += "; " + "; ".join(verdict.notes)
    proves = genesis is not None and verdict.reason is None
    return LedgerInfo(
        backend=kind,
        store_id=store_id(kind, genesis, namespace) if proves and genesis else None,
        reason=verdict.reason,
        location=location,
        namespace=namespace,
        identity=identity,
    )


def ambiguous(failure: BaseException, retry_error: BaseException) -> AmbiguousSpend:
    return AmbiguousSpend(
        f"the spend's reply was lost ({failure}) and re-reading its token failed "
        f"({retry_error}): it may or may not be recorded"
    )
