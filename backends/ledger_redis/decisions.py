"""Every Redis decision as I/O-free steps yielding :mod:`.commands`' operations, which
the sync and async drivers perform (C9).

Standalone (:class:`Pool`) speaks on one pooled connection per exchange, so nothing sent
(``LedgerUnavailable``) is told from a lost reply (``ReplyLost``, which a spend
resolves). redis-py's Cluster client retries on its own, so every failure there counts
as possibly sent (a spend's script answers the stored token: a resend finds its own).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Generator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from ledger_core import notices
from ledger_core.errors import (
    AmbiguousSpend,
    InvalidLedgerURL,
    LedgerClosed,
    LedgerError,
    LedgerUnavailable,
    UnsafeStoreConfig,
    missing_namespace,
)
from ledger_core.guard import Guard
from ledger_core.ids import is_marker, marker_range, marker_subject, validate_namespace
from ledger_core.protocol import LedgerInfo
from ledger_core.tokens import TOKEN_BYTES, attempt_outcome, new_token

from . import identity
from .commands import (
    BORROW,
    FACT_COMMANDS,
    PRIMARIES,
    Command,
    Exec,
    Keys,
    Op,
    Plan,
    Read,
    Release,
    Send,
    as_eval,
    epoch_command,
    glob_escape,
    namespace_of,
    scan_command,
)
from .errors import IdentityLost, ReplyLost, driver_error, redis_module
from .identity import ServerFacts, facts_from_replies
from .options import RedisOptions

R = TypeVar("R")
Steps = Generator[Op, Any, R]
DIGEST_BYTES = 32  # ledger_core.reentry.attempt_digest
BATCH = 1000  # spend scripts per pipelined trip

# When the running operation must be over (time.monotonic()); context-local.
DEADLINE: ContextVar[float | None] = ContextVar("ledger_redis_deadline", default=None)


def in_time(what: str) -> None:
    deadline = DEADLINE.get()
    if deadline is not None and deadline - time.monotonic() <= 0.0:
        raise LedgerUnavailable(f"{what}: the operation's timeout ran out before sending")


class Operation:
    """``with`` around one operation's steps: one deadline for all its waits, nothing raw
    out of it (C4), and a store that forgot fails the ``session`` for good."""

    __slots__ = ("_budget", "_session", "_spend", "_what")

    def __init__(
        self, io: Transport, what: str, *, spend: bool, session: Session | None = None
    ) -> None:
        self._budget, self._what, self._spend, self._session = io.budget, what, spend, session

    def __enter__(self) -> None:
        DEADLINE.set(None if self._budget is None else time.monotonic() + self._budget)

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> None:
        DEADLINE.set(None)  # a host's own commands on its client are never cut short
        if isinstance(exc, IdentityLost) and self._session is not None:
            self._session.guard.fail(exc)
        if isinstance(exc, Exception) and not isinstance(exc, LedgerError):
            # Nobody foresaw it: never raw (C4); a spend's outcome is then unknown.
            text = f"{self._what}: unexpected {type(exc).__name__} from the driver"
            raise (AmbiguousSpend(text) if self._spend else LedgerUnavailable(text)) from exc


# ---------------------------------------------------------------- transports


class _Transport:
    """``budget``: seconds one operation may take in all (``None``: no socket timeout)."""

    cluster = False

    def __init__(self, client: Any, location: str, budget: float | None = None) -> None:
        self.client, self.location, self.budget = client, location, budget
        self.closed = False
        exceptions = redis_module().exceptions
        self._refused: type[Exception] = exceptions.ResponseError
        self._noscript: type[Exception] = exceptions.NoScriptError

    def close(self) -> None:
        self.closed = True

    def _start(self, what: str) -> None:
        if self.closed:
            raise LedgerClosed("the ledger is closed")
        in_time(what)


class Pool(_Transport):
    """Standalone. Reads never pass ``read_response(timeout=...)``: redis-py's asyncio
    connection answers ``None`` when it expires, which a spend would read as "written
    now"; the socket timeout raises instead."""

    def __init__(self, pool: Any, location: str, budget: float | None = None) -> None:
        if getattr(pool, "cache", None) is not None:
            raise UnsafeStoreConfig("a pool with client-side caching could serve stale reads")
        super().__init__(pool, location, budget)

    def call(self, commands: Sequence[Command], what: str) -> Steps[list[Any]]:
        """One trip's replies; only the first one's error raises (a ``WAIT``'s is judged)."""
        replies = yield from self._exchange(commands, what)
        if isinstance(replies[0], self._noscript) and commands[0][0] == "EVALSHA":
            # The server lost its script cache: the script did not run; resend as EVAL.
            replies = yield from self._exchange(as_eval(commands), what)
        if isinstance(replies[0], Exception):
            raise driver_error(replies[0], what, sent=True) from replies[0]
        return replies

    def facts(self) -> Steps[list[ServerFacts]]:
        replies = yield from self._exchange(FACT_COMMANDS, "read the configuration")
        return [facts_from_replies(self.location, *replies)]

    def scan(self, node: Any, command: Command, proof: Command | None, what: str) -> Steps[Any]:
        replies = yield from self._exchange([command] if proof is None else [command, proof], what)
        for reply in replies:
            if isinstance(reply, Exception):
                raise driver_error(reply, what, sent=True) from reply
        cursor, keys = replies[0]
        return (None if proof is None else replies[1]), cursor, keys

    def _exchange(self, commands: Sequence[Command], what: str) -> Steps[list[Any]]:
        """Each reply of one trip, or the server's error for it. No cleanup is yielded on
        a ``BaseException``: the driver drops a cancelled operation's connection."""
        self._start(what)
        try:
            conn = yield BORROW
        except Exception as exc:
            raise driver_error(exc, what, sent=False) from exc
        try:
            in_time(what)
        except LedgerUnavailable:
            yield Release(conn)
            raise
        try:
            yield Send(conn, commands)
            replies: list[Any] = []
            for _ in commands:
                try:
                    replies.append((yield Read(conn)))
                except self._refused as exc:
                    replies.append(exc)  # the connection stays in step: read the rest
        except Exception as exc:
            yield Release(conn, drop=True)
            raise driver_error(exc, what, sent=True) from exc
        yield Release(conn)
        return replies


class Cluster(_Transport):
    cluster = True

    def __init__(self, cluster: Any, location: str, budget: float | None = None) -> None:
        if getattr(cluster, "read_from_replicas", False) or getattr(
            cluster, "load_balancing_strategy", None
        ):
            raise UnsafeStoreConfig(
                "a Cluster client that reads from replicas can miss a fresh spend (C3): "
                "build it without read_from_replicas / load_balancing_strategy"
            )
        if cluster.get_encoder().decode_responses:
            raise UnsafeStoreConfig(
                "a Cluster client with decode_responses=True cannot hold tokens"
            )
        super().__init__(cluster, location, budget)

    def call(self, commands: Sequence[Command], what: str) -> Steps[list[Any]]:
        (command,) = commands  # no WAIT here: see plan_for
        self._start(what)
        try:
            try:
                return [(yield Exec(command))]
            except self._noscript:
                (command,) = as_eval(commands)  # NOSCRIPT: the script did not run
                return [(yield Exec(command))]
        except Exception as exc:
            raise driver_error(exc, what, sent=True) from exc

    def primaries(self, what: str) -> Steps[list[Any]]:
        """Every master: a namespace lives in one slot, but the slot may move mid-scan."""
        self._start(what)
        try:
            return list((yield PRIMARIES))
        except Exception as exc:
            raise driver_error(exc, what, sent=False) from exc

    def facts(self) -> Steps[list[ServerFacts]]:
        what = "read the configuration"
        out = []
        for node in (yield from self.primaries(what)):
            replies = []
            for command in FACT_COMMANDS:
                try:
                    replies.append((yield Exec(command, {"target_nodes": node})))
                except self._refused as exc:
                    replies.append(exc)  # refused (NOPERM, renamed): judged as unknown
                except Exception as exc:
                    # Not read at all (a lost node, no free connection): no verdict.
                    raise driver_error(exc, what, sent=False) from exc
            out.append(facts_from_replies(f"node {node.name}", *replies))
        return out

    def scan(self, node: Any, command: Command, proof: Command | None, what: str) -> Steps[Any]:
        self._start(what)
        try:
            cursors, keys = yield Exec(command, {"target_nodes": node})
            # The proof is routed by its slot, right after the page.
            proved = None if proof is None else (yield Exec(proof))
        except Exception as exc:
            raise driver_error(exc, what, sent=True) from exc
        if isinstance(cursors, dict) and len(cursors) == 1:
            cursors = next(iter(cursors.values()))
        return proved, cursors, keys


Transport = Pool | Cluster


def transport_for(client: Any, *, asyncio_client: bool) -> Transport:
    redis = redis_module()
    flavour = redis.asyncio if asyncio_client else redis
    if isinstance(client, flavour.cluster.RedisCluster):
        nodes = client.get_nodes()
        where = f"redis+cluster://{nodes[0].name}" if nodes else ""
        return Cluster(client, where, _budget(client.get_connection_kwargs()))
    pool = client.connection_pool if isinstance(client, flavour.Redis) else client
    if isinstance(pool, flavour.ConnectionPool):
        kwargs = pool.connection_kwargs
        return Pool(pool, _describe(kwargs, type(client).__name__), _budget(kwargs))
    raise InvalidLedgerURL(
        f"expected a {'redis.asyncio' if asyncio_client else 'redis-py'} Redis, "
        f"ConnectionPool or RedisCluster, not {type(client).__name__}"
    )


def _budget(kwargs: Mapping[str, Any]) -> float | None:
    seconds = kwargs.get("socket_timeout")
    return float(seconds) if isinstance(seconds, int | float) and seconds > 0 else None


def _describe(kwargs: Mapping[str, Any], kind: str) -> str:
    if "path" in kwargs:
        return f"unix://{kwargs['path']}"
    if "host" in kwargs:
        return f"redis://{kwargs['host']}:{kwargs.get('port', 6379)}/{kwargs.get('db', 0)}"
    return f"<{kind}>"


@dataclass(frozen=True)
class Opened:
    plan: Plan
    info: LedgerInfo
    options: RedisOptions
    facts: tuple[ServerFacts, ...] = ()  # as read at open (the doctor shows them)
    replication: identity.Replication | None = None  # None: not read (accepted, or no store)


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


# ---------------------------------------------------------------- opening


def open_steps(io: Transport, namespace: str, options: RedisOptions) -> Steps[Opened]:
    with Operation(io, "open", spend=False):
        facts = yield from io.facts()
        identity.check_topology(facts, options, cluster=io.cluster)
        verdict = identity.judge(facts, options)
        keys = Keys(namespace, io.cluster)
        writable = all(f.role in (None, "master") for f in facts)
        genesis = yield from _genesis(io, keys, options.create, writable)
        replication = None
        if genesis is not None and not options.failover_may_lose_spends:
            replication = yield from _replication(io, keys)
            verdict = identity.judge_replication(verdict, replication, options)
        epoch = None if replication is None or replication.error else replication.epoch
        version = identity.server_version(facts)
        plan = plan_for(options, version, cluster=io.cluster, keys=keys, genesis=genesis or b"")
        plan = replace(plan, epoch=epoch)
        if plan.probe_waitaof:
            try:
                yield from io.call([("WAITAOF", 0, 0, 0)], "open (WAITAOF probe)")
            except LedgerError as exc:
                raise UnsafeStoreConfig(
                    f"option 'wait_aof' needs WAITAOF (Redis >= 7.2); the server refused it ({exc})"
                ) from exc
        info = identity.ledger_info(
            kind="redis-cluster" if io.cluster else "redis",
            location=io.location,
            namespace=namespace,
            genesis=genesis,
            verdict=verdict,
            keys=keys,
            epoch=epoch,
        )
        return Opened(plan, info, options, tuple(facts), replication)


def _replication(io: Transport, keys: Keys) -> Steps[identity.Replication]:
    """Routed as every spend is (the genesis key); a refusal (ACL without INFO) is unknown."""
    try:
        (reply,) = yield from io.call([epoch_command(keys)], "open (replication)")
    except IdentityLost:
        raise
    except LedgerError as exc:
        if isinstance(exc, ReplyLost) or not isinstance(exc.__cause__, Exception):
            raise
        return identity.replication_from(exc.__cause__)
    return identity.replication_from(reply)


def _genesis(io: Transport, keys: Keys, create: bool, writable: bool) -> Steps[bytes | None]:
    """Written (``SET NX``: the first opener wins) only if ``create`` and writable."""
    (value,) = yield from io.call([("GET", keys.genesis)], "open")
    if value is None:
        legacy = keys.legacy_genesis
        if legacy is not None:
            (old,) = yield from io.call([("GET", legacy)], "open")
            if old is not None:
                raise UnsafeStoreConfig(
                    "this namespace holds a Cluster ledger in the old key layout (keys not "
                    "hash-tagged by namespace); this version cannot prove its genesis in "
                    "the same round trip as a spend: keep the old version for it, or "
                    "start a new namespace"
                )
        if not create:
            raise missing_namespace(keys.namespace, f"(its genesis key) at {io.location}")
        if not writable:
            return None
        fresh = identity.new_genesis()
        yield from io.call([("SET", keys.genesis, fresh, "NX")], "open")
        (value,) = yield from io.call([("GET", keys.genesis)], "open")
        if value == fresh:  # ours, not a racing opener's
            notices.created(io.location, keys.namespace)
    if not isinstance(value, bytes) or not identity.GENESIS_PATTERN.match(value):
        raise UnsafeStoreConfig(
            f"key {keys.genesis!r} does not hold a ledger identity: something else wrote "
            "it; refusing to guess"
        )
    return value


# ---------------------------------------------------------------- operations


class Session:
    """One open ledger: the re-check, and the failure that keeps it closed once its
    store forgot or changed (never a new identity)."""

    def __init__(self, io: Transport, opened: Opened) -> None:
        self.io, self.opened, self.plan = io, opened, opened.plan
        self.guard = Guard(opened.options.recheck_interval)

    def _guard(self, what: str, *, spend: bool) -> Operation:
        self.guard.check()
        return Operation(self.io, what, spend=spend, session=self)

    def _recheck(self) -> Steps[None]:
        if not self.guard.due():
            return
        try:
            facts = yield from self.io.facts()
            verdict = identity.judge(facts, self.opened.options)
        except BaseException:
            self.guard.again()
            raise
        changed = identity.changed_since_open(self.opened.info, verdict)
        if changed is not None:
            raise self.guard.fail(changed)

    def spend(self, request_id: bytes, digest: bytes | None = None) -> Steps[bool]:
        """After a lost reply the same script and value settle it (C5); with ``digest``
        (C10) the value is token + digest."""
        value = new_token() if digest is None else new_token() + digest
        return (yield from self._spend([request_id], [value], "spend"))[0]

    def spend_many(self, request_ids: Sequence[bytes]) -> Steps[list[bool]]:
        size, what = (1, "spend") if self.io.cluster else (BATCH, "spend_many")
        out: list[bool] = []
        for i in range(0, len(request_ids), size):
            batch = request_ids[i : i + size]
            out += yield from self._spend(batch, [new_token() for _ in batch], what)
        return out

    def _spend(self, ids: Sequence[bytes], values: list[bytes], what: str) -> Steps[list[bool]]:
        with self._guard(what, spend=True):
            yield from self._recheck()
            commands = self.plan.spend_many_commands(ids, values)
            replies, failure = yield from self._settle(commands, what)
            return spend_many_outcome(self.plan, replies, values, failure, what)

    def _settle(
        self, commands: Sequence[Command], what: str
    ) -> Steps[tuple[list[Any], ReplyLost | None]]:
        """The replies, and a lost first reply for the caller to weigh; a second failure
        is ambiguous (C5), unless the store forgot."""
        try:
            return (yield from self.io.call(commands, what)), None
        except ReplyLost as failure:
            try:
                replies = yield from self.io.call(commands, f"{what} (resolve)")
            except IdentityLost:
                raise
            except LedgerError as exc:
                raise AmbiguousSpend(
                    f"the spend's reply was lost ({failure}) and re-reading its token failed "
                    f"({exc}): it may or may not be recorded"
                ) from failure
            return replies, failure

    def is_spent(self, request_id: bytes) -> Steps[bool]:
        with self._guard("is_spent", spend=False):
            yield from self._recheck()
            (reply,) = yield from self.io.call(self.plan.read_commands(request_id), "is_spent")
            return exists_reply(reply)

    def reidentify(self) -> Steps[None]:
        """A fresh genesis over the one this ledger opened (one script, as durable as a
        spend): every instance, this one included, then fails closed (C6)."""
        with self._guard("reidentify", spend=False):
            commands = self.plan.reidentify_commands(identity.new_genesis())
            replies = yield from self.io.call(commands, "reidentify")
            if self.plan.wait is not None:
                check_ack(self.plan.wait, replies[-1])
        self.guard.fail(IdentityLost("reidentify: this ledger's identity was replaced; reopen"))

    def is_spent_many(self, request_ids: Sequence[bytes]) -> Steps[list[bool]]:
        """The read script of each id, pipelined ``BATCH`` per trip (one per trip on a
        Cluster: its ids live in one slot, but the client sends one command at a time)."""
        size = 1 if self.io.cluster else BATCH
        out: list[bool] = []
        for i in range(0, len(request_ids), size):
            with self._guard("is_spent_many", spend=False):
                yield from self._recheck()
                batch = request_ids[i : i + size]
                commands = [c for rid in batch for c in self.plan.read_commands(rid)]
                replies = yield from self.io.call(commands, "is_spent_many")
                for reply in replies:  # only the first one's error raised: each is judged
                    if isinstance(reply, Exception):
                        raise driver_error(reply, "is_spent_many", sent=True) from reply
                out += [exists_reply(reply) for reply in replies]
        return out

    def page(self, scan: Scan) -> Steps[tuple[list[str], Scan | None]]:
        """A page and the scan to go on with, or ``([], None)``: ``ledger_core.listing``."""
        with self._guard(scan.what, spend=False):
            items = yield from scan.page(self.io)
            return ([], None) if items is None else (items, scan)


# ---------------------------------------------------------------- outcomes


def stored_outcome(stored: Any, value: bytes) -> bool:
    """nil: we wrote ``value``; our value (a resend found it) or the same attempt
    digest (C10) wins too; anything else is another's."""
    if stored is None:
        return True
    if not isinstance(stored, bytes):
        raise LedgerUnavailable(f"unexpected SET NX GET reply of type {type(stored).__name__}")
    if len(value) == TOKEN_BYTES + DIGEST_BYTES and len(stored) == len(value):
        return stored[TOKEN_BYTES:] == value[TOKEN_BYTES:]
    return bool(attempt_outcome(stored, value))


def spend_many_outcome(
    plan: Plan,
    replies: Sequence[Any],
    tokens: Sequence[bytes],
    failure: BaseException | None = None,
    what: str = "spend_many",
) -> list[bool]:
    """``failure``: these are a resend's replies; a write found landed then cannot be
    vouched for by ``WAIT``, which counts only its own connection's writes."""
    stored = replies[: len(tokens)]
    for reply in stored:
        if isinstance(reply, Exception):
            raise driver_error(reply, what, sent=True) from reply
    won = [stored_outcome(r, tok) for r, tok in zip(stored, tokens, strict=True)]
    if plan.wait is None:
        return won
    if failure is not None and any(w and r is not None for w, r in zip(won, stored, strict=True)):
        raise AmbiguousSpend(
            "the spend landed (its attempt token is stored) after a lost reply, but its "
            "replication cannot be confirmed from another connection"
        ) from failure
    if any(won):
        check_ack(plan.wait, replies[-1])
    return won


def check_ack(wait: Command, ack: Any) -> None:
    """Short of the acknowledgements asked, a won spend is no proof (``AmbiguousSpend``)."""
    if isinstance(ack, Exception):
        raise AmbiguousSpend(
            f"the spend was recorded on the primary but {wait[0]} failed ({ack}): it is not proof"
        ) from ack
    try:
        if wait[0] == "WAITAOF":
            local, replicas = (int(x) for x in ack)
            if local >= 1 and replicas >= wait[2]:
                return
            got = f"local fsync {local}, replicas {replicas} of {wait[2]}"
        else:
            if int(ack) >= wait[1]:
                return
            got = f"{int(ack)} of {wait[1]} replicas"
    except (TypeError, ValueError) as exc:
        raise AmbiguousSpend(
            f"the spend was recorded on the primary but {wait[0]} answered "
            f"{type(ack).__name__}: it is not proof"
        ) from exc
    raise AmbiguousSpend(
        f"the spend was recorded on the primary but acknowledged by {got} within "
        f"{wait[-1]} ms: it could be lost on a failover, so it is not proof"
    )


def exists_reply(reply: Any) -> bool:
    if reply in (1, True):
        return True
    if reply in (0, False):
        return False
    raise LedgerUnavailable(f"unexpected EXISTS reply {reply!r}")


# ---------------------------------------------------------------- listings


class Scan:
    """A ``SCAN`` over every master. It may return a key twice (a rehash), so each
    listed item's 16-byte digest is kept for the scan, never the items themselves."""

    what = "scan"

    def __init__(self, pattern: bytes, count: int, proof: Command | None) -> None:
        if count < 1:
            raise ValueError("count must be at least 1")
        self.pattern, self.count, self._proof = pattern, count, proof
        self._nodes: list[Any] | None = None
        self._cursor = 0
        self._started = False
        self._seen: set[bytes] = set()

    def page(self, io: Transport) -> Steps[list[str] | None]:
        if self._nodes is None:
            self._nodes = (
                (yield from io.primaries(self.what)) if isinstance(io, Cluster) else [None]
            )
        if self._started and self._cursor == 0:
            self._nodes.pop(0)
            self._started = False
        if not self._nodes:
            return None
        self._started = True
        command = scan_command(self._cursor, self.pattern, self.count)
        proved, cursor, keys = yield from io.scan(self._nodes[0], command, self._proof, self.what)
        return self.take(proved, cursor, keys)

    def take(self, proved: Any, cursor: Any, keys: Sequence[Any]) -> list[str]:
        if self._proof is not None and proved != 1:  # a failed proof raised IdentityLost
            raise LedgerUnavailable(f"{self.what}: unexpected identity proof reply {proved!r:.60}")
        if isinstance(cursor, bytes) and cursor.isdigit():
            cursor = int(cursor)
        if not isinstance(cursor, int) or cursor < 0:
            raise LedgerUnavailable(f"{self.what}: SCAN answered cursor {cursor!r}")
        self._cursor = cursor
        out: list[str] = []
        for key in keys:
            if not isinstance(key, bytes):
                raise LedgerUnavailable(f"{self.what}: SCAN answered a {type(key).__name__}")
            item = self.keep(key)
            if item is None:
                continue
            digest = hashlib.blake2b(item.encode("utf-8"), digest_size=16).digest()
            if digest not in self._seen:
                self._seen.add(digest)
                out.append(item)
        return out

    def keep(self, key: bytes) -> str | None:
        raise NotImplementedError


class Listing(Scan):
    """``spent_ids`` (or one marker kind's subjects): the identity proof follows each
    page, never precedes it: a store that forgot after a proof would answer an empty
    page as if it were the end."""

    what = "spent_ids"

    def __init__(self, plan: Plan, count: int, marker_kind: str | None = None) -> None:
        self._kind = marker_kind
        self._marker = b"" if marker_kind is None else marker_range(marker_kind)[0]
        self._prefix = plan.keys.record_prefix
        pattern = glob_escape(self._prefix + self._marker) + b"*"
        super().__init__(pattern, count, plan.proof_command)

    def keep(self, key: bytes) -> str | None:
        if not key.startswith(self._prefix):
            # MATCH returned something outside the prefix: refuse to guess.
            raise LedgerUnavailable(f"spent_ids: SCAN answered a foreign key {key!r:.80}")
        raw = key[len(self._prefix) :]
        if self._kind is not None:
            return marker_subject(self._kind, raw) if raw.startswith(self._marker) else None
        if is_marker(raw):
            return None
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise UnsafeStoreConfig(
                f"spent_ids: record key {key!r:.80} holds no UTF-8 id: something else "
                "wrote it; refusing to guess"
            ) from None


class NamespaceScan(Scan):
    """``namespaces()``: genesis keys are all there is to scan (every spend proves one)."""

    what = "namespaces"

    def __init__(self, keys: Keys, count: int) -> None:
        self._keys = keys
        super().__init__(keys.genesis_pattern, count, None)

    def keep(self, key: bytes) -> str | None:
        name = namespace_of(key, self._keys.cluster)
        if name is None:
            if self._keys.cluster:
                return None  # a look-alike no ledger of this layout reads: not ours
            raise LedgerUnavailable(f"namespaces: SCAN answered a foreign key {key!r:.80}")
        try:
            return validate_namespace(name.decode("utf-8"))
        except (UnicodeDecodeError, InvalidLedgerURL):
            raise UnsafeStoreConfig(
                f"namespaces: genesis key {key!r:.80} names no valid namespace: something "
                "else wrote it; refusing to guess"
            ) from None
