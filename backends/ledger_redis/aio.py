# async-to-sync: ledger.py
# async-to-sync rename: AsyncRedisLedger=RedisLedger pages_async=pages redis.asyncio=redis
# async-to-sync rename: AsyncReentrantLedgerBase=ReentrantLedgerBase
"""The Redis ledger, written once: ``aio.py`` calls ``redis.asyncio`` directly, and
``ledger.py``, the sync flavour on redis-py's sync objects, is generated from it.

A spend reads top-down: ``spend`` (``ledger_core.base``) -> ``_spend`` -> ``_spends`` ->
``Pool.call`` -> the driver. One genesis-proving Lua script per spend or read (one round
trip, ``WAIT`` pipelined in it), never an expiry.

Standalone (:class:`Pool`) speaks on one pooled connection per trip, so nothing sent
(``LedgerUnavailable``) is told from a lost reply (``ReplyLost``, which a spend
resolves). redis-py's Cluster client retries on its own, so every failure there counts
as possibly sent (a spend's script answers the stored token: a resend finds its own).

Deadlines are where the flavours differ: asyncio cancels an operation's awaits at its
deadline (``timeout_at``); sync sockets cut each wait to the time left (``.deadline``).
"""

from __future__ import annotations

import sys
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ledger_core import notices
from ledger_core.base import AsyncReentrantLedgerBase
from ledger_core.doctor import Check
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
from ledger_core.ids import (
    DEFAULT_NAMESPACE,
    MarkerKind,
    id_batches,
    validate_namespace,
)
from ledger_core.listing import pages_async
from ledger_core.tokens import TOKEN_BYTES, new_token

from . import identity
from .commands import (
    FACT_COMMANDS,
    Command,
    Keys,
    Plan,
    as_eval,
    epoch_command,
    pack,
    plan_for,
)
from .deadline import Bound, bound_sync
from .errors import IdentityLost, ReplyLost, driver_error, redis_module
from .identity import ServerFacts, facts_from_replies
from .options import RedisOptions
from .scans import Listing, NamespaceScan, Scan

ASYNC = True

if ASYNC:
    import asyncio

    if sys.version_info >= (3, 11):
        from asyncio import timeout_at
    else:  # redis-py depends on async-timeout there
        from async_timeout import timeout_at  # type: ignore[import-not-found, unused-ignore]

DIGEST_BYTES = 32  # ledger_core.reentry.attempt_digest
BATCH = 1000  # scripts per pipelined trip


def deadline_of(budget: float | None) -> float | None:
    """When an operation given ``budget`` seconds must be over (``time.monotonic()``,
    asyncio's clock too)."""
    return None if budget is None else time.monotonic() + budget


# ---------------------------------------------------------------- links


class Link:
    """One client as the ledger speaks to it. ``budget``: seconds one operation may take
    in all (``None``: no socket timeout); ``guard``: the ledger failed for good when a
    reply says the store forgot."""

    cluster = False

    def __init__(self, client: Any, location: str, budget: float | None = None) -> None:
        self.client, self.location, self.budget = client, location, budget
        self.closed = False
        self.guard: Guard | None = None
        exceptions = redis_module().exceptions
        self._refused: type[Exception] = exceptions.ResponseError
        self._noscript: type[Exception] = exceptions.NoScriptError

    def close(self) -> None:
        self.closed = True

    def start(self, what: str, deadline: float | None) -> None:
        """Before a trip: nothing is sent on a closed ledger, or with no time left."""
        if self.closed:
            raise LedgerClosed("the ledger is closed")
        if deadline is not None and time.monotonic() >= deadline:
            raise LedgerUnavailable(f"{what}: the operation's timeout ran out before sending")

    def failed(self, exc: BaseException, what: str, *, sent: bool) -> LedgerError:
        """``exc`` mapped (C4); a store that forgot fails the ledger for good."""
        error = driver_error(exc, what, sent=sent)
        if isinstance(error, IdentityLost) and self.guard is not None:
            self.guard.fail(error)
        return error


class Pool(Link):
    """Standalone. Reads never pass ``read_response(timeout=...)``: redis-py's asyncio
    connection answers ``None`` when it expires, which a spend would read as "written
    now"; the deadline raises instead."""

    def __init__(self, pool: Any, location: str, budget: float | None = None) -> None:
        if getattr(pool, "cache", None) is not None:
            raise UnsafeStoreConfig("a pool with client-side caching could serve stale reads")
        super().__init__(pool, location, budget)
        if not ASYNC:  # its sockets keep the deadline
            bound_sync(pool, budget, cluster=False)

    async def call(
        self,
        commands: Sequence[Command],
        what: str,
        deadline: float | None,
        *,
        every: bool = False,
    ) -> list[Any]:
        """One trip: every reply, or the server's error for it; only the first one's
        error raises (a ``WAIT``'s is judged), none with ``every``. A connection whose
        trip fails or is cancelled midway is dropped, never reused."""
        if self.closed:  # Link.start, inline on the hot path
            raise LedgerClosed("the ledger is closed")
        if deadline is not None and time.monotonic() >= deadline:
            raise LedgerUnavailable(f"{what}: the operation's timeout ran out before sending")
        pool, sent, packed = self.client, False, [pack(commands)]
        if ASYNC:  # noqa: SIM108 (the flavours differ)
            bound = timeout_at(deadline)  # asyncio cancels the awaits at the deadline
        else:
            bound = Bound(deadline)  # the sockets cut each wait to the time left
        try:
            async with bound:
                conn = await pool.get_connection()
                try:
                    sent = True
                    await conn.send_packed_command(packed)
                    replies: list[Any] = []
                    for _ in commands:
                        try:
                            replies.append(await conn.read_response(disable_decoding=True))
                        except self._refused as exc:
                            replies.append(exc)  # the connection stays in step: read the rest
                except BaseException:
                    if ASYNC:
                        await conn.disconnect(nowait=True)
                    else:
                        conn.disconnect()
                    await pool.release(conn)
                    raise
        except Exception as exc:
            raise self.failed(exc, what, sent=sent) from exc
        await pool.release(conn)  # outside the deadline: it never waits on the server
        first = replies[0]
        if isinstance(first, self._noscript) and commands[0][0] == "EVALSHA":
            # The server lost its script cache: the script did not run; resend as EVAL.
            return await self.call(as_eval(commands), what, deadline, every=every)
        if isinstance(first, Exception) and not every:
            raise self.failed(first, what, sent=True) from first
        return replies

    async def facts(self, deadline: float | None) -> list[ServerFacts]:
        replies = await self.call(FACT_COMMANDS, "read the configuration", deadline, every=True)
        return [facts_from_replies(self.location, *replies)]

    async def scan(
        self, node: Any, command: Command, proof: Command | None, what: str, deadline: float | None
    ) -> tuple[Any, Any, Any]:
        replies = await self.call([command] if proof is None else [command, proof], what, deadline)
        for reply in replies:
            if isinstance(reply, Exception):
                raise self.failed(reply, what, sent=True) from reply
        cursor, keys = replies[0]
        return (None if proof is None else replies[1]), cursor, keys

    async def primaries(self, what: str, deadline: float | None) -> list[Any]:
        return [None]  # one server


class Cluster(Link):
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
        if ASYNC:
            # redis-py's async Cluster client fails at once when a node's connections are
            # all in use; a semaphore as wide as that limit makes commands wait instead.
            limit = cluster.get_connection_kwargs().get("max_connections")
            self._slots = asyncio.Semaphore(int(limit or 100) or 1)
        else:  # every node's sockets keep the deadline
            bound_sync(cluster, budget, cluster=True)

    async def execute(self, command: Command, deadline: float | None, **options: Any) -> Any:
        """One command, routed by redis-py (``target_nodes`` in ``options``)."""
        if ASYNC:
            async with timeout_at(deadline), self._slots:
                return await self.client.execute_command(*command, **options)
        else:
            with Bound(deadline):
                return self.client.execute_command(*command, **options)

    async def call(
        self, commands: Sequence[Command], what: str, deadline: float | None
    ) -> list[Any]:
        (command,) = commands  # no WAIT here: see plan_for
        self.start(what, deadline)
        try:
            try:
                return [await self.execute(command, deadline)]
            except self._noscript:
                (command,) = as_eval(commands)  # NOSCRIPT: the script did not run
                return [await self.execute(command, deadline)]
        except Exception as exc:
            raise self.failed(exc, what, sent=True) from exc

    async def primaries(self, what: str, deadline: float | None) -> list[Any]:
        """Every master: a namespace lives in one slot, but the slot may move mid-scan."""
        self.start(what, deadline)
        try:
            if ASYNC:
                async with timeout_at(deadline):
                    await self.client.initialize()
            return list(self.client.get_primaries())
        except Exception as exc:
            raise self.failed(exc, what, sent=False) from exc

    async def facts(self, deadline: float | None) -> list[ServerFacts]:
        what = "read the configuration"
        out = []
        for node in await self.primaries(what, deadline):
            replies = []
            for command in FACT_COMMANDS:
                try:
                    replies.append(await self.execute(command, deadline, target_nodes=node))
                except self._refused as exc:
                    replies.append(exc)  # refused (NOPERM, renamed): judged as unknown
                except Exception as exc:
                    # Not read at all (a lost node, no free connection): no verdict.
                    raise self.failed(exc, what, sent=False) from exc
            out.append(facts_from_replies(f"node {node.name}", *replies))
        return out

    async def scan(
        self, node: Any, command: Command, proof: Command | None, what: str, deadline: float | None
    ) -> tuple[Any, Any, Any]:
        self.start(what, deadline)
        try:
            cursors, keys = await self.execute(command, deadline, target_nodes=node)
            # The proof is routed by its slot, right after the page.
            proved = None if proof is None else await self.execute(proof, deadline)
        except Exception as exc:
            raise self.failed(exc, what, sent=True) from exc
        if isinstance(cursors, dict) and len(cursors) == 1:
            cursors = next(iter(cursors.values()))
        return proved, cursors, keys


def link_for(client: Any) -> Pool | Cluster:
    """A host's ``Redis``, ``ConnectionPool`` or ``RedisCluster`` (never closed)."""
    redis = redis_module()
    flavour = redis.asyncio  # redis-py's objects of this flavour
    if isinstance(client, flavour.cluster.RedisCluster):
        nodes = client.get_nodes()
        where = f"redis+cluster://{nodes[0].name}" if nodes else ""
        return Cluster(client, where, _budget(client.get_connection_kwargs()))
    pool = client.connection_pool if isinstance(client, flavour.Redis) else client
    if isinstance(pool, flavour.ConnectionPool):
        kwargs = pool.connection_kwargs
        return Pool(pool, _describe(kwargs, type(client).__name__), _budget(kwargs))
    raise InvalidLedgerURL(
        f"expected a {flavour.__name__} Redis, "
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


async def preflight_checks(link: Pool | Cluster, options: RedisOptions) -> list[Check]:
    """``decision-ledger doctor`` before ``setup``: the servers' settings, read as an
    open reads them (one trip per server); nothing is written."""
    facts = await link.facts(deadline_of(link.budget))
    driver = str(getattr(redis_module(), "__version__", "?"))
    return identity.settings_checks(facts, options, driver)


# ---------------------------------------------------------------- the ledger


class AsyncRedisLedger(AsyncReentrantLedgerBase):
    """A ledger in Redis: one genesis-proving script per spend or read (one round trip,
    ``WAIT`` included), never an expiry."""

    def __init__(
        self,
        link: Pool | Cluster,
        namespace: str,
        options: RedisOptions,
        on_close: Callable[[], Any] | None = None,
    ) -> None:
        self._link, self._options, self._on_close = link, options, on_close
        self._keys = Keys(namespace, link.cluster)
        self._guard = link.guard = Guard(options.recheck_interval)
        self._facts: tuple[ServerFacts, ...] = ()  # as read at open (the doctor shows them)
        self._replication: identity.Replication | None = None  # None: not read

    @classmethod
    async def from_client(
        cls, client: Any, *, namespace: str = DEFAULT_NAMESPACE, **options: Any
    ) -> AsyncRedisLedger:
        """A ledger on a host's ``Redis``, ``ConnectionPool`` or ``RedisCluster`` (never closed)."""
        opts = RedisOptions.for_client(options)
        link = link_for(client)
        return await cls.open_on(link, namespace=validate_namespace(namespace), options=opts)

    @classmethod
    async def open_on(
        cls,
        link: Pool | Cluster,
        *,
        namespace: str,
        options: RedisOptions,
        on_close: Callable[[], Any] | None = None,
    ) -> AsyncRedisLedger:
        ledger = cls(link, namespace, options, on_close)
        try:
            await ledger._open(deadline_of(link.budget))
        except BaseException:
            if on_close is not None:
                await on_close()
            raise
        return ledger

    async def _open(self, deadline: float | None) -> None:
        """Read and judge the servers, prove or write the genesis, bind the replication
        epoch, and choose the scripts; nothing raw out of it (C4)."""
        link, keys, options = self._link, self._keys, self._options
        try:
            facts = await link.facts(deadline)
            identity.check_topology(facts, options, cluster=link.cluster)
            verdict = identity.judge(facts, options)
            writable = all(f.role in (None, "master") for f in facts)
            genesis = await self._genesis(writable, deadline)
            if genesis is not None and not options.failover_may_lose_spends:
                self._replication = await self._replication_of(deadline)
                verdict = identity.judge_replication(verdict, self._replication, options)
            replication = self._replication
            epoch = None if replication is None or replication.error else replication.epoch
            version = identity.server_version(facts)
            plan = plan_for(
                options, version, cluster=link.cluster, keys=keys, genesis=genesis or b""
            )
            plan = replace(plan, epoch=epoch)
            if plan.probe_waitaof:
                try:
                    await link.call([("WAITAOF", 0, 0, 0)], "open (WAITAOF probe)", deadline)
                except LedgerError as exc:
                    raise UnsafeStoreConfig(
                        "option 'wait_aof' needs WAITAOF (Redis >= 7.2); the server refused "
                        f"it ({exc})"
                    ) from exc
        except LedgerError:
            raise
        except Exception as exc:  # nobody foresaw it: never raw (C4)
            text = f"open: unexpected {type(exc).__name__} from the driver"
            raise LedgerUnavailable(text) from exc
        self._facts = tuple(facts)
        self._prepare(plan)
        self._info = identity.ledger_info(
            kind="redis-cluster" if link.cluster else "redis",
            location=link.location,
            namespace=keys.namespace,
            genesis=genesis,
            verdict=verdict,
            keys=keys,
            epoch=epoch,
        )

    def _prepare(self, plan: Plan) -> None:
        """What every spend and read sends, built once: the scripts' digests, the genesis
        proof, the record keys' prefix (the id follows it)."""
        self._plan, self._wait, self._proof = plan, plan.wait, plan.proof
        self._genesis_key, self._record_prefix = plan.keys.genesis, plan.keys.record_prefix
        self._spend_sha = plan.spend_script.sha
        self._spend_as_sha = plan.spend_as_script.sha
        self._read_sha = plan.read_script.sha

    async def _genesis(self, writable: bool, deadline: float | None) -> bytes | None:
        """Written (``SET NX``: the first opener wins) only if ``create`` and writable."""
        link, keys = self._link, self._keys
        (value,) = await link.call([("GET", keys.genesis)], "open", deadline)
        if value is None:
            legacy = keys.legacy_genesis
            if legacy is not None:
                (old,) = await link.call([("GET", legacy)], "open", deadline)
                if old is not None:
                    raise UnsafeStoreConfig(
                        "this namespace holds a Cluster ledger in the old key layout (keys "
                        "not hash-tagged by namespace); this version cannot prove its "
                        "genesis in the same round trip as a spend: keep the old version "
                        "for it, or start a new namespace"
                    )
            if not self._options.create:
                raise missing_namespace(keys.namespace, f"(its genesis key) at {link.location}")
            if not writable:
                return None
            fresh = identity.new_genesis()
            await link.call([("SET", keys.genesis, fresh, "NX")], "open", deadline)
            (value,) = await link.call([("GET", keys.genesis)], "open", deadline)
            if value == fresh:  # ours, not a racing opener's
                notices.created(link.location, keys.namespace)
        if not isinstance(value, bytes) or not identity.GENESIS_PATTERN.match(value):
            raise UnsafeStoreConfig(
                f"key {keys.genesis!r} does not hold a ledger identity: something else "
                "wrote it; refusing to guess"
            )
        return value

    async def _replication_of(self, deadline: float | None) -> identity.Replication:
        """Routed as every spend is (the genesis key); a refusal (ACL without INFO) is unknown."""
        try:
            command = epoch_command(self._keys)
            (reply,) = await self._link.call([command], "open (replication)", deadline)
        except IdentityLost:
            raise
        except LedgerError as exc:
            if isinstance(exc, ReplyLost) or not isinstance(exc.__cause__, Exception):
                raise
            return identity.replication_from(exc.__cause__)
        return identity.replication_from(reply)

    # ------------------------------------------------------------ operations

    async def _begin(self) -> float | None:
        """Before an operation: failed for good raises; the configuration is re-read
        when due. The operation's deadline."""
        guard = self._guard
        if guard.failed is not None:
            guard.check()
        budget = self._link.budget
        deadline = None if budget is None else time.monotonic() + budget
        if guard.due():
            try:
                verdict = identity.judge(await self._link.facts(deadline), self._options)
            except BaseException:
                guard.again()
                raise
            changed = identity.changed_since_open(self._info, verdict)
            if changed is not None:
                raise guard.fail(changed)
        return deadline

    async def _spend(self, request_id: bytes, digest: bytes | None = None) -> bool:
        """The spend script with a fresh value: a token, or with ``digest`` (C10) token +
        digest; after a lost reply the same script and value settle it (C5)."""
        if digest is None:
            sha, value = self._spend_sha, new_token()
        else:
            sha, value = self._spend_as_sha, new_token() + digest
        key = self._record_prefix + request_id
        command = ("EVALSHA", sha, 2, self._genesis_key, key, self._proof, value)
        return (await self._spends([command], [value], "spend"))[0]

    _spend_as = _spend

    async def spend_many(self, request_ids: Sequence[str]) -> list[bool]:
        """Pipelined, 1000 scripts per trip (one per trip on a Cluster); a repeat within a
        trip finds its first copy's value: ``False``."""
        size, what = (1, "spend") if self._link.cluster else (BATCH, "spend_many")
        head = ("EVALSHA", self._spend_sha, 2, self._genesis_key)  # then key, proof, value
        prefix, proof = self._record_prefix, self._proof
        out: list[bool] = []
        for batch in id_batches(request_ids, size):
            commands, values = [], []
            for request_id in batch:
                value = new_token()
                commands.append((*head, prefix + request_id, proof, value))
                values.append(value)
            out += await self._spends(commands, values, what)
        return out

    async def _spends(self, commands: list[Command], values: list[bytes], what: str) -> list[bool]:
        """Spend scripts in one trip, then one ``WAIT`` for all, if asked; a lost reply
        resolved by sending the same again."""
        deadline = await self._begin()
        if self._wait is not None:
            commands = [*commands, self._wait]
        failure: ReplyLost | None = None
        try:
            replies = await self._link.call(commands, what, deadline)
        except ReplyLost as lost:
            failure, replies = lost, await self._resolve(commands, what, deadline, lost)
        return spend_outcomes(self._link, self._wait, replies, values, failure, what)

    async def _resolve(
        self, commands: list[Command], what: str, deadline: float | None, failure: ReplyLost
    ) -> list[Any]:
        """The same scripts again: each finds its own value if it landed (C5); a second
        failure is ambiguous, unless the store forgot."""
        try:
            return await self._link.call(commands, f"{what} (resolve)", deadline)
        except IdentityLost:
            raise
        except LedgerError as exc:
            raise AmbiguousSpend(
                f"the spend's reply was lost ({failure}) and re-reading its token failed "
                f"({exc}): it may or may not be recorded"
            ) from failure

    async def _is_spent(self, request_id: bytes) -> bool:
        deadline = await self._begin()
        command = (
            "EVALSHA",
            self._read_sha,
            2,
            self._genesis_key,
            self._record_prefix + request_id,
            self._proof,
        )
        (reply,) = await self._link.call([command], "is_spent", deadline)
        return exists_reply(reply)

    async def is_spent_many(self, request_ids: Sequence[str]) -> list[bool]:
        """The read script of each id, pipelined 1000 per trip (one per trip on a Cluster:
        its ids live in one slot, but the client sends one command at a time)."""
        size = 1 if self._link.cluster else BATCH
        head = ("EVALSHA", self._read_sha, 2, self._genesis_key)  # then key, proof
        prefix, proof = self._record_prefix, self._proof
        out: list[bool] = []
        for batch in id_batches(request_ids, size):
            deadline = await self._begin()
            commands = [(*head, prefix + r, proof) for r in batch]
            replies = await self._link.call(commands, "is_spent_many", deadline)
            for reply in replies:  # only the first one's error raised: each is judged
                if isinstance(reply, Exception):
                    raise self._link.failed(reply, "is_spent_many", sent=True) from reply
            out += [exists_reply(reply) for reply in replies]
        return out

    async def reidentify(self) -> None:
        """``Reidentifiable``: one script over the genesis this ledger opened, as durable
        as a spend."""
        deadline = await self._begin()
        commands = self._plan.reidentify_commands(identity.new_genesis())
        replies = await self._link.call(commands, "reidentify", deadline)
        if self._wait is not None:
            check_ack(self._wait, replies[-1])
        self._guard.fail(IdentityLost("reidentify: this ledger's identity was replaced; reopen"))

    # ------------------------------------------------------------ listings

    def spent_ids(self, count: int = 1000) -> AsyncIterator[str]:
        """Every id spent in this namespace, by ``SCAN`` pages of ``count``."""
        return self._scan(Listing(self._plan, count))

    def namespaces(self, count: int = 1000) -> AsyncIterator[str]:
        """Every namespace with a genesis in this key space, each once."""
        return self._scan(NamespaceScan(self._keys, count))

    async def lineage(self) -> list[str]:
        scan = Listing(self._plan, 1000, MarkerKind.LINEAGE)
        return sorted([source async for source in self._scan(scan)])

    def _scan(self, scan: Scan) -> AsyncIterator[str]:
        return pages_async(self._page, scan)

    async def _page(self, scan: Scan) -> tuple[list[str], Scan | None]:
        """A page and the scan to go on with, or ``([], None)``: ``ledger_core.listing``."""
        if self._guard.failed is not None:
            self._guard.check()
        return await page(self._link, scan, deadline_of(self._link.budget))

    # ------------------------------------------------------------ the rest

    def doctor_checks(self) -> list[Check]:
        return identity.doctor_checks(
            self._facts,
            self._options,
            self._info,
            str(getattr(redis_module(), "__version__", "?")),
            self._replication,
            sentinel=self._link.location.startswith("redis+sentinel:"),
        )

    async def aclose(self) -> None:
        if self._link.closed:
            return
        self._link.close()
        if self._on_close is not None:
            await self._on_close()


async def page(
    link: Pool | Cluster, scan: Scan, deadline: float | None
) -> tuple[list[str], Scan | None]:
    """One ``SCAN`` page over the masters in turn (``scan`` keeps the place), proven
    when the scan carries a proof."""
    try:
        if scan.nodes is None:
            scan.nodes = await link.primaries(scan.what, deadline)
        command = scan.next_command()
        if command is None:
            return [], None
        node = scan.nodes[0]
        proved, cursor, keys = await link.scan(node, command, scan.proof, scan.what, deadline)
        return scan.take(proved, cursor, keys), scan
    except LedgerError:
        raise
    except Exception as exc:  # nobody foresaw it: never raw (C4)
        raise LedgerUnavailable(f"{scan.what}: unexpected {type(exc).__name__}") from exc


# ---------------------------------------------------------------- outcomes


def spend_outcomes(
    link: Link,
    wait: Command | None,
    replies: Sequence[Any],
    values: Sequence[bytes],
    failure: BaseException | None = None,
    what: str = "spend_many",
) -> list[bool]:
    """Each script's reply against the value sent: nil, we wrote it; our value (a resend
    found it) or the same attempt digest (C10) wins too; anything else is another's.
    ``failure``: these are a resend's replies; a write found landed then cannot be
    vouched for by ``WAIT``, which counts only its own connection's writes."""
    won: list[bool] = []
    for stored, value in zip(replies, values, strict=False):  # a WAIT's reply comes last
        if stored is None:
            won.append(True)
        elif isinstance(stored, bytes):
            if len(value) == TOKEN_BYTES + DIGEST_BYTES and len(stored) == len(value):
                won.append(stored[TOKEN_BYTES:] == value[TOKEN_BYTES:])
            else:
                won.append(stored == value)
        elif isinstance(stored, Exception):
            raise link.failed(stored, what, sent=True) from stored
        else:
            raise LedgerUnavailable(f"unexpected SET NX GET reply of type {type(stored).__name__}")
    if wait is None:
        return won
    if failure is not None and any(w and r is not None for w, r in zip(won, replies, strict=False)):
        raise AmbiguousSpend(
            "the spend landed (its attempt token is stored) after a lost reply, but its "
            "replication cannot be confirmed from another connection"
        ) from failure
    if any(won):
        check_ack(wait, replies[-1])
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
