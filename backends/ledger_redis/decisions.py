"""Open, spend, spend_as, is_spent, the listings and the periodic re-check, decided
once as I/O-free steps.

Each generator yields a :data:`~.transport.Request` (one trip of commands, the servers'
facts, the nodes to scan, one ``SCAN`` page), receives the replies or has the
transport's ``LedgerError`` thrown into it, and returns the result. The sync and async
ledgers drive the same generators (``ledger_core.steps``), so they cannot decide
differently (C9).
"""

from __future__ import annotations

import hashlib
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ledger_core.errors import (
    AmbiguousSpend,
    InvalidLedgerURL,
    LedgerError,
    LedgerUnavailable,
    UnsafeStoreConfig,
)
from ledger_core.ids import is_marker, marker_range, marker_subject, validate_namespace
from ledger_core.protocol import LedgerInfo
from ledger_core.tokens import TOKEN_BYTES, attempt_outcome, new_token

from . import identity
from .commands import (
    Command,
    Keys,
    Plan,
    epoch_command,
    glob_escape,
)
from .errors import IdentityLost, ReplyLost, ambiguous, driver_error, unexpected
from .options import RedisOptions
from .transport import CALL, FACTS, NODES, SCAN, Page, Request

Steps = Generator[Request, Any, Any]
DIGEST_BYTES = 32  # ledger_core.reentry.attempt_digest


@dataclass(frozen=True)
class Opened:
    plan: Plan
    info: LedgerInfo
    options: RedisOptions
    facts: tuple[identity.ServerFacts, ...] = ()  # as read at open (the doctor shows them)
    replication: identity.Replication | None = None  # None: not read (accepted, or no store)


def plan_for(
    options: RedisOptions,
    version: tuple[int, ...] | None,
    *,
    cluster: bool,
    keys: Keys | None = None,
    genesis: bytes = b"",
) -> Plan:
    """The commands this server gets. ``version`` is ``None`` when the server would not
    say (ACL without INFO): unknown is never taken for an old server; what depends on
    it is asked of the server itself (``probe_waitaof``) or fails closed on its
    refusal. The scripts carry the ``#!lua`` shebang for Redis >= 7 (an unknown
    version counts as 7), which makes a read-only replica refuse reads too."""
    if cluster and options.waits:
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
    return Plan(
        keys=keys or Keys("default"),
        genesis=genesis,
        shebang=version is None or version >= (7, 0),
        wait=wait,
        probe_waitaof=probe,
    )


# ---------------------------------------------------------------- opening


def open_steps(
    namespace: str, options: RedisOptions, *, cluster: bool, location: str
) -> Generator[Request, Any, Opened]:
    """Read the servers' facts, then the namespace's genesis (create it if allowed)."""
    facts = yield (FACTS, None, "open")
    identity.check_topology(facts, options, cluster=cluster)
    verdict = identity.judge(facts, options)
    keys = Keys(namespace, cluster)
    writable = all(f.role in (None, "master") for f in facts)
    genesis = yield from genesis_steps(keys, options.create, writable)
    replication = None
    if genesis is not None and not options.failover_may_lose_spends:
        replication = yield from replication_steps(keys)
        verdict = identity.judge_replication(verdict, replication, options)
    epoch = None if replication is None or replication.error else replication.epoch
    plan = plan_for(
        options, identity.server_version(facts), cluster=cluster, keys=keys, genesis=genesis or b""
    )
    plan = replace(plan, epoch=epoch)
    if plan.probe_waitaof:
        # The version is unknown (INFO denied): ask the server itself, never guess.
        try:
            yield (CALL, [("WAITAOF", 0, 0, 0)], "open (WAITAOF probe)")
        except LedgerError as exc:
            raise UnsafeStoreConfig(
                f"option 'wait_aof' needs WAITAOF (Redis >= 7.2); the server refused it ({exc})"
            ) from exc
    info = identity.ledger_info(
        kind="redis-cluster" if cluster else "redis",
        location=location,
        namespace=namespace,
        genesis=genesis,
        verdict=verdict,
        keys=keys,
        epoch=epoch,
    )
    return Opened(plan, info, options, tuple(facts), replication)


def replication_steps(keys: Keys) -> Generator[Request, Any, identity.Replication]:
    """The replication facts of the master that owns the namespace's slot, by the route
    every spend takes (the genesis key); a refusal (ACL without INFO) is unknown."""
    try:
        (reply,) = yield (CALL, [epoch_command(keys)], "open (replication)")
    except IdentityLost:
        raise
    except LedgerError as exc:
        if isinstance(exc, ReplyLost) or not isinstance(exc.__cause__, Exception):
            raise
        return identity.replication_from(exc.__cause__)
    return identity.replication_from(reply)


def genesis_steps(
    keys: Keys, create: bool, writable: bool
) -> Generator[Request, Any, bytes | None]:
    """The namespace's genesis value; written (``SET NX``: the first opener wins) only
    when ``create`` and the server takes writes. A read never creates a store."""
    (value,) = yield (CALL, [("GET", keys.genesis)], "open")
    if value is None:
        legacy = keys.legacy_genesis
        if legacy is not None:
            (old,) = yield (CALL, [("GET", legacy)], "open")
            if old is not None:
                raise UnsafeStoreConfig(
                    "this namespace holds a Cluster ledger in the old key layout (keys not "
                    "hash-tagged by namespace); this version cannot prove its genesis in "
                    "the same round trip as a spend: keep the old version for it, or "
                    "start a new namespace"
                )
        if not create:
            raise LedgerUnavailable(
                f"no ledger in namespace {keys.namespace!r} here (its genesis key is "
                "missing) and create=false: reads and migration sources never create a "
                "store; create it with `decision-ledger setup URL` (or create=true)"
            )
        if not writable:
            return None
        yield (CALL, [("SET", keys.genesis, identity.new_genesis(), "NX")], "open")
        (value,) = yield (CALL, [("GET", keys.genesis)], "open")
    if not isinstance(value, bytes) or not identity.GENESIS_PATTERN.match(value):
        raise UnsafeStoreConfig(
            f"key {keys.genesis!r} does not hold a ledger identity: something else wrote "
            "it; refusing to guess"
        )
    return value


# ---------------------------------------------------------------- spending


def spend_steps(
    plan: Plan, request_id: bytes, token: bytes, digest: bytes | None = None
) -> Generator[Request, Any, bool]:
    """One trip; after a lost reply, the same script with the same value settles it.

    With ``digest`` (``spend_as``, C10) the value written is the token followed by the
    attempt's digest, in the same script: ``True`` also when the stored value carries
    the same digest (the same attempt re-entering); a plain spend's record has none.
    """
    value = token if digest is None else token + digest
    replies, failure = yield from settle_steps(plan.spend_commands(request_id, value), "spend")
    if failure is not None:
        return resolve_outcome(plan, replies, value, failure)
    return spend_outcome(plan, replies, value)


def settle_steps(
    commands: Sequence[Command], what: str
) -> Generator[Request, Any, tuple[list[Any], ReplyLost | None]]:
    """One trip; after a lost reply, the same commands again (the spend script finds its
    own value: SET NX GET), and the loss, for the caller to weigh. A second failure is
    ambiguous (C5), unless the store forgot."""
    try:
        return (yield (CALL, commands, what)), None
    except ReplyLost as failure:
        try:
            replies = yield (CALL, commands, f"{what} (resolve)")
        except IdentityLost:
            raise
        except LedgerError as exc:
            raise ambiguous(failure, exc) from failure
        return replies, failure


def stored_outcome(stored: Any, value: bytes) -> bool:
    """What the spend script's reply proves: nil, it was absent and we wrote ``value``;
    our own value (a resend found its write); the same attempt digest (C10 re-entry);
    anything else is another's."""
    if stored is None:
        return True
    if not isinstance(stored, bytes):
        raise LedgerUnavailable(f"unexpected SET NX GET reply of type {type(stored).__name__}")
    if len(value) == TOKEN_BYTES + DIGEST_BYTES and len(stored) == len(value):
        return stored[TOKEN_BYTES:] == value[TOKEN_BYTES:]
    return bool(attempt_outcome(stored, value))


def spend_outcome(plan: Plan, replies: Sequence[Any], value: bytes) -> bool:
    """What the first trip's replies prove: ``True`` only if our write landed (or the
    same attempt's, for ``spend_as``)."""
    won = stored_outcome(replies[0], value)
    if won:
        check_ack(plan, replies)
    return won


def resolve_outcome(
    plan: Plan, replies: Sequence[Any], value: bytes, failure: BaseException
) -> bool:
    """After a lost reply: did the retry find our value, a foreign one, or none?"""
    stored = replies[0]
    won = stored_outcome(stored, value)
    if won and plan.wait is not None and stored is not None:
        # Our write landed on the lost connection; WAIT counts only the writes of
        # the connection it runs on, so it cannot vouch for that one.
        raise AmbiguousSpend(
            "the spend landed (its attempt token is stored) after a lost reply, but "
            "its replication cannot be confirmed from another connection"
        ) from failure
    if won:
        check_ack(plan, replies)
    return won


BATCH = 1000  # spend scripts per pipelined trip


def spend_many_batches(plan: Plan, request_ids: Sequence[bytes]) -> Iterator[Steps]:
    """The steps of each pipelined trip of a batch, a fresh token per id."""
    for i in range(0, len(request_ids), BATCH):
        chunk = request_ids[i : i + BATCH]
        yield spend_many_steps(plan, chunk, [new_token() for _ in chunk])


def spend_many_steps(
    plan: Plan, request_ids: Sequence[bytes], tokens: Sequence[bytes]
) -> Generator[Request, Any, list[bool]]:
    """One pipelined trip for a batch; after a lost reply, the same scripts with the
    same tokens settle every id (SET NX GET finds its own token)."""
    commands = plan.spend_many_commands(request_ids, tokens)
    replies, failure = yield from settle_steps(commands, "spend_many")
    return spend_many_outcome(plan, replies, tokens, failure)


def spend_many_outcome(
    plan: Plan,
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
    won = [stored_outcome(r, tok) for r, tok in zip(stored, tokens, strict=True)]
    landed = any(w and r is not None for w, r in zip(won, stored, strict=True))
    if failure is not None and plan.wait is not None and landed:
        raise AmbiguousSpend(
            "a batch landed (attempt tokens stored) after a lost reply, but its "
            "replication cannot be confirmed from another connection"
        ) from failure
    if any(won):
        check_ack(plan, [None, replies[-1]] if plan.wait is not None else replies)
    return won


def check_ack(plan: Plan, replies: Sequence[Any]) -> None:
    """A won spend with ``WAIT``/``WAITAOF``: short of the acknowledgements asked, it is
    recorded on the primary but no proof (``AmbiguousSpend``)."""
    wait = plan.wait
    if wait is None:
        return
    ack = replies[1]
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


# ---------------------------------------------------------------- reading


def read_steps(plan: Plan, request_id: bytes) -> Generator[Request, Any, bool]:
    (reply,) = yield (CALL, plan.read_commands(request_id), "is_spent")
    return exists_reply(reply)


def exists_reply(reply: Any) -> bool:
    if reply in (1, True):
        return True
    if reply in (0, False):
        return False
    raise LedgerUnavailable(f"unexpected EXISTS reply {reply!r}")


def recheck_steps(opened: Opened) -> Generator[Request, Any, UnsafeStoreConfig | None]:
    """Read the configuration again: what would now withdraw the proof, if anything."""
    facts = yield (FACTS, None, "re-check")
    return identity.changed_since_open(opened.info, identity.judge(facts, opened.options))


class Guard:
    """What every operation of one ledger goes through: the periodic re-check, and the
    failure that keeps a ledger closed once its store forgot or changed (never a new
    identity)."""

    def __init__(self, opened: Opened) -> None:
        self.opened = opened
        self.recheck = identity.Recheck(opened.options.recheck_interval)
        self.failed: LedgerError | None = None

    def raise_if_failed(self) -> None:
        if self.failed is not None:
            raise type(self.failed)(str(self.failed)) from self.failed

    def steps(
        self, steps: Generator[Request, Any, Any], what: str, *, spend: bool, recheck: bool = True
    ) -> Steps:
        """``steps`` behind the guard: refused when failed, the re-check first when due,
        a forgotten store failing the ledger for good, nothing raw (C4)."""
        self.raise_if_failed()
        try:
            if recheck and self.recheck.due():
                try:
                    changed = yield from recheck_steps(self.opened)
                except BaseException:
                    self.recheck.failed()
                    raise
                if changed is not None:
                    self.failed = changed
                    raise changed
            return (yield from steps)
        except IdentityLost as exc:
            self.failed = exc
            raise
        except LedgerError:
            raise
        except Exception as exc:
            raise unexpected(exc, what, spend=spend) from exc


# ---------------------------------------------------------------- listings


class Scan:
    """The decisions of a ``SCAN`` over every master, without I/O: which page to ask
    for next, and what its keys mean (:meth:`keep`, per subclass).

    ``SCAN`` may return a key twice (a rehash during the scan), so each listed item's
    16-byte BLAKE2b digest is kept for the scan's duration: memory is one page plus 16
    bytes per listed item, never the items themselves.
    """

    what = "scan"

    def __init__(self, pattern: bytes, count: int, proof: Command | None) -> None:
        if count < 1:
            raise ValueError("count must be at least 1")
        self.pattern = pattern
        self.count = count
        self._proof = proof
        self._nodes: list[Any] | None = None
        self._cursor = 0
        self._started = False
        self._seen: set[bytes] = set()

    def page_steps(self) -> Generator[Request, Any, list[str] | None]:
        """One page's items, or ``None`` when every master is done."""
        if self._nodes is None:
            self._nodes = list((yield (NODES, None, self.what)))
        if self._started and self._cursor == 0:
            self._nodes.pop(0)
            self._started = False
        if not self._nodes:
            return None
        self._started = True
        page = Page(self._nodes[0], self._cursor, self.pattern, self.count, self._proof)
        proved, cursor, keys = yield (SCAN, page, self.what)
        return self.take(proved, cursor, keys)

    def take(self, proved: Any, cursor: Any, keys: Sequence[Any]) -> list[str]:
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
    """``spent_ids`` (or the subjects of one kind of marker: ``lineage``): every page
    is followed by the identity proof (genesis and replication epoch), in the same trip
    (standalone) or as the next command (Cluster). After the page, not before: a store
    that forgot between a proof and the ``SCAN`` would answer an empty page as if it
    were the end; one that forgot before the proof fails it."""

    what = "spent_ids"

    def __init__(self, plan: Plan, count: int, marker_kind: str | None = None) -> None:
        """``marker_kind``: list the subjects of that kind of marker instead of ids."""
        self._plan = plan
        self._kind = marker_kind
        self._marker = b"" if marker_kind is None else marker_range(marker_kind)[0]
        self._prefix = plan.keys.record_prefix
        pattern = glob_escape(self._prefix + self._marker) + b"*"
        super().__init__(pattern, count, plan.proof_command)

    def take(self, proved: Any, cursor: Any, keys: Sequence[Any]) -> list[str]:
        """The page's request ids (markers, other namespaces and repeats left out)."""
        if proved != 1:  # a failed proof is an error reply: IdentityLost by then
            raise LedgerUnavailable(f"spent_ids: unexpected identity proof reply {proved!r:.60}")
        return super().take(proved, cursor, keys)

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
    """``namespaces()``: every namespace with a genesis key in this key space (this
    layout: standalone, or hash-tagged on a Cluster), each once. A record cannot exist
    without its namespace's genesis (every spend proves it), so genesis keys are all
    there is to scan."""

    what = "namespaces"

    def __init__(self, keys: Keys, count: int) -> None:
        self._keys = keys
        super().__init__(keys.genesis_pattern, count, None)

    def keep(self, key: bytes) -> str | None:
        name = self._keys.namespace_of(key)
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
