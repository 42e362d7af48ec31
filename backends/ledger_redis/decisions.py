"""Open, spend, is_spent and the periodic re-check, decided once as I/O-free steps.

Each generator yields a :data:`Request` (``(CALL, commands, what)``: one round trip of
the transport; ``(FACTS, None, what)``: the servers' ``INFO``/``CONFIG``), receives the
replies or has the transport's ``LedgerError`` thrown into it, and returns the result.
The sync and async ledgers drive the same generators (``ledger_core.steps``), so they
cannot decide differently (C9).
"""

from __future__ import annotations

import hashlib
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ledger_core.errors import LedgerError, LedgerUnavailable, UnsafeStoreConfig
from ledger_core.ids import is_marker, marker_range, marker_subject
from ledger_core.protocol import LedgerInfo
from ledger_core.tokens import new_token

from . import rules
from .rules import (
    GENESIS_PATTERN,
    IdentityLost,
    Keys,
    RedisOptions,
    ReplyLost,
    SpendPlan,
    exists_reply,
)

CALL = "call"
FACTS = "facts"
Request = tuple[str, Sequence[rules.Command] | None, str]
Steps = Generator[Request, Any, Any]


@dataclass(frozen=True)
class Opened:
    plan: SpendPlan
    info: LedgerInfo
    options: RedisOptions


def open_steps(
    namespace: str, options: RedisOptions, *, cluster: bool, location: str
) -> Generator[Request, Any, Opened]:
    """Read the servers' facts, then the namespace's genesis (create it if allowed)."""
    facts = yield (FACTS, None, "open")
    rules.check_topology(facts, options, cluster=cluster)
    verdict = rules.judge(facts, options)
    keys = Keys(namespace, cluster)
    writable = all(f.role in (None, "master") for f in facts)
    genesis = yield from genesis_steps(keys, options.create, writable)
    plan = SpendPlan.build(
        options,
        rules.server_version(facts),
        driver_retries=cluster,
        keys=keys,
        genesis=genesis or b"",
    )
    if plan.probe_waitaof:
        # The version is unknown (INFO denied): ask the server itself, never guess.
        try:
            yield (CALL, [("WAITAOF", 0, 0, 0)], "open (WAITAOF probe)")
        except LedgerError as exc:
            raise UnsafeStoreConfig(
                f"option 'wait_aof' needs WAITAOF (Redis >= 7.2); the server refused it ({exc})"
            ) from exc
    info = rules.ledger_info(
        kind="redis-cluster" if cluster else "redis",
        location=location,
        namespace=namespace,
        genesis=genesis,
        verdict=verdict,
        keys=keys,
    )
    return Opened(plan, info, options)


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
        yield (CALL, [("SET", keys.genesis, rules.new_genesis(), "NX")], "open")
        (value,) = yield (CALL, [("GET", keys.genesis)], "open")
    if not isinstance(value, bytes) or not GENESIS_PATTERN.match(value):
        raise UnsafeStoreConfig(
            f"key {keys.genesis!r} does not hold a ledger identity: something else wrote "
            "it; refusing to guess"
        )
    return value


def spend_steps(plan: SpendPlan, request_id: bytes, token: bytes) -> Generator[Request, Any, bool]:
    """One trip; after a lost reply, the same script with the same token settles it."""
    try:
        replies = yield (CALL, plan.spend_commands(request_id, token), "spend")
    except ReplyLost as failure:
        try:
            replies = yield (CALL, plan.resolve_commands(request_id, token), "spend (resolve)")
        except IdentityLost:
            raise
        except LedgerError as exc:
            raise rules.ambiguous(failure, exc) from failure
        return plan.resolve_outcome(replies, token, failure)
    return plan.spend_outcome(replies, token)


BATCH = 1000  # spend scripts per pipelined trip


def spend_many_batches(plan: SpendPlan, request_ids: Sequence[bytes]) -> Iterator[Steps]:
    """The steps of each pipelined trip of a batch, a fresh token per id."""
    for i in range(0, len(request_ids), BATCH):
        chunk = request_ids[i : i + BATCH]
        yield spend_many_steps(plan, chunk, [new_token() for _ in chunk])


def spend_many_steps(
    plan: SpendPlan, request_ids: Sequence[bytes], tokens: Sequence[bytes]
) -> Generator[Request, Any, list[bool]]:
    """One pipelined trip for a batch; after a lost reply, the same scripts with the
    same tokens settle every id (SET NX GET finds its own token)."""
    commands = plan.spend_many_commands(request_ids, tokens)
    try:
        replies = yield (CALL, commands, "spend_many")
    except ReplyLost as failure:
        try:
            replies = yield (CALL, commands, "spend_many (resolve)")
        except IdentityLost:
            raise
        except LedgerError as exc:
            raise rules.ambiguous(failure, exc) from failure
        return plan.spend_many_outcome(replies, tokens, failure)
    return plan.spend_many_outcome(replies, tokens)


def read_steps(plan: SpendPlan, request_id: bytes) -> Generator[Request, Any, bool]:
    (reply,) = yield (CALL, plan.read_commands(request_id), "is_spent")
    return exists_reply(reply)


def recheck_steps(opened: Opened) -> Generator[Request, Any, UnsafeStoreConfig | None]:
    """Read the configuration again: what would now withdraw the proof, if anything."""
    facts = yield (FACTS, None, "re-check")
    return rules.changed_since_open(opened.info, rules.judge(facts, opened.options))


def unexpected(exc: Exception, what: str, *, spend: bool) -> LedgerError:
    """An exception nobody foresaw (a driver bug, a decode error): never raw (C4). After
    a spend was handed to the transport its outcome is unknown."""
    from ledger_core.errors import AmbiguousSpend

    text = f"{what}: unexpected {type(exc).__name__} from the driver"
    return AmbiguousSpend(text) if spend else LedgerUnavailable(text)


class Listing:
    """The decisions of ``spent_ids``, without I/O: which page to ask for next, and
    what a page's keys mean.

    Every page is asked with the genesis read in the same trip (standalone) or just
    before (Cluster: a second command; the window is one page). ``SCAN`` may return a
    key twice (a rehash during the scan), so each id's 16-byte BLAKE2b digest is kept
    for the scan's duration: memory is one page plus 16 bytes per listed id, never
    the ids themselves.
    """

    def __init__(
        self, plan: SpendPlan, nodes: Sequence[Any], count: int, marker_kind: str | None = None
    ) -> None:
        """``marker_kind``: list the subjects of that kind of marker instead of ids."""
        if count < 1:
            raise ValueError("count must be at least 1")
        self._plan = plan
        self._nodes = list(nodes)
        self._cursor = 0
        self._started = False
        self._seen: set[bytes] = set()
        self.count = count
        self._kind = marker_kind
        self._marker = b"" if marker_kind is None else marker_range(marker_kind)[0]
        self.pattern = rules.glob_escape(plan.keys.record_prefix + self._marker) + b"*"
        self._prefix = plan.keys.record_prefix

    def next_page(self) -> tuple[Any, int] | None:
        """``(node, cursor)`` to scan next, or ``None`` when every master is done."""
        if self._started and self._cursor == 0:
            self._nodes.pop(0)
            self._started = False
        if not self._nodes:
            return None
        self._started = True
        return self._nodes[0], self._cursor

    def take(self, genesis: Any, cursor: Any, keys: Sequence[Any]) -> list[str]:
        """The page's request ids (markers, other namespaces and repeats left out)."""
        if genesis != self._plan.genesis:
            how = "gone" if genesis is None else "different"
            raise IdentityLost("spent_ids: " + rules.FORGOT.format(how=how))
        if not isinstance(cursor, int) or cursor < 0:
            raise LedgerUnavailable(f"spent_ids: SCAN answered cursor {cursor!r}")
        self._cursor = cursor
        out: list[str] = []
        for key in keys:
            if not isinstance(key, bytes) or not key.startswith(self._prefix):
                # MATCH returned something outside the prefix: refuse to guess.
                raise LedgerUnavailable(f"spent_ids: SCAN answered a foreign key {key!r:.80}")
            raw = key[len(self._prefix) :]
            if self._kind is not None:
                if raw.startswith(self._marker):
                    out.append(marker_subject(self._kind, raw))
                continue
            if is_marker(raw):
                continue
            digest = hashlib.blake2b(raw, digest_size=16).digest()
            if digest in self._seen:
                continue
            self._seen.add(digest)
            try:
                out.append(raw.decode("utf-8"))
            except UnicodeDecodeError:
                raise UnsafeStoreConfig(
                    f"spent_ids: record key {key!r:.80} holds no UTF-8 id: something else "
                    "wrote it; refusing to guess"
                ) from None
        return out
