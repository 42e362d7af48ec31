"""What open, spend, is_spent and listing decide, once, as I/O-free step generators of
:mod:`.commands` requests; the sync and async shells only perform them (C9).

Identity after open (C6): an answer that could let a call run (``spend`` True,
``is_spent`` False, a listed page) is followed, in the same operation, by a consistent
read of the namespace's genesis (random, written once, never rewritten: present now means
present since open). ``DescribeTable`` is re-read every ``config_interval`` seconds, by
one caller, and every caller that comes while that re-check is due waits for it, within
its own deadline, before it answers; a ``ResourceNotFoundException`` (the table is gone)
fails the ledger for good.
Every call has one deadline (``timeout`` from its start) shared by its attempts.
"""

from __future__ import annotations

import dataclasses
import os
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ledger_core import notices
from ledger_core.errors import (
    AmbiguousSpend,
    LedgerClosed,
    LedgerError,
    LedgerUnavailable,
    UnsafeStoreConfig,
    missing_namespace,
    missing_store,
)
from ledger_core.forks import PerProcess
from ledger_core.guard import Guard
from ledger_core.ids import is_marker, ledger_key
from ledger_core.protocol import LedgerInfo
from ledger_core.steps import Steps

from . import commands, identity
from .commands import DIGEST, SCAN_SEGMENTS, TOKEN, Request, binary
from .errors import (
    code_of,
    fail,
    is_conditional,
    is_not_found,
    mark_attempts,
    old_item,
    rejected,
    retried,
    transient,
)
from .identity import TableFacts
from .options import MAX_ATTEMPTS, Settings, per_attempt

CREATE_WAIT = 120.0  # seconds a new table may take to become ACTIVE
POLL = 0.1  # seconds between DescribeTable polls while it is created


@dataclass
class Handle:
    """The shell's client: one per process. The shell's ``process`` (a
    :class:`~ledger_core.forks.PerProcess`) tells a forked child to build its own."""

    make_client: Any  # () -> client, or an async one
    client: Any
    owned: bool
    closed: bool = False

    def adopt(self, client: Any) -> None:
        self.client, self.owned = client, True

    def closes(self, inherited: bool) -> bool:
        """Whether closing the ledger must close the client (ours, in its own process)."""
        first = not self.closed
        self.closed = True
        return first and self.owned and not inherited


@dataclass
class Recheck:
    """The table re-check's state in one process: a forked child starts with none under
    way (a parent's caller would never finish it there) and its own lock, held for no
    I/O, so the async shell may take it on its loop."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    due: bool = False  # due, and none has passed since: no caller answers meanwhile
    running: bool = False  # one caller runs it; the others wait for it
    passed: int = 0  # re-checks passed: a waiter's cue


def _per_process() -> PerProcess[Recheck]:
    return PerProcess(Recheck(), Recheck)


@dataclass
class Session:
    """One ledger's view of its table, shared by every call (threads or tasks)."""

    table: str
    settings: Settings
    location: str
    endpoint_url: str | None
    facts: TableFacts | None = None
    genesis: bytes = b""
    info: LedgerInfo | None = None
    guard: Guard = field(default_factory=lambda: Guard(0.0), repr=False)  # its own at open
    recheck: PerProcess[Recheck] = field(default_factory=_per_process, repr=False)

    @property
    def namespace(self) -> str:
        return self.settings.namespace


def _table(answer: Any) -> dict[str, Any]:
    table = answer.get("Table") if isinstance(answer, dict) else None
    if not isinstance(table, dict):
        raise LedgerUnavailable("DescribeTable answered without a table description")
    return table


def server_header(answer: Any) -> str:
    """The answering server's ``Server`` header (emulators name themselves there)."""
    meta = answer.get("ResponseMetadata") if isinstance(answer, dict) else None
    headers = meta.get("HTTPHeaders") if isinstance(meta, dict) else None
    found = headers.items() if isinstance(headers, dict) else ()
    # botocore lowercases header names; aiobotocore keeps the server's spelling.
    return next((v for n, v in found if str(n).lower() == "server" and isinstance(v, str)), "")


def send(session: Session, call: commands.Call, deadline: float) -> Steps[Request, Any]:
    """``call`` within ``deadline``; the last failure is raised, marked as retried when
    an earlier attempt may have landed (C5)."""
    share = per_attempt(session.settings.timeout)
    attempt, uncertain = 0, False  # uncertain: an attempt before the last may have landed
    if time.monotonic() >= deadline:
        raise LedgerUnavailable(
            f"DynamoDB {call.op} on {session.location}: the call's timeout "
            f"({session.settings.timeout:g} s) ran out before it could be sent"
        )
    while True:
        attempt += 1
        try:
            return (yield dataclasses.replace(call, due=deadline, share=share))
        except Exception as exc:
            pause = random.uniform(0.0, min(0.05 * 2**attempt, 1.0))
            late = time.monotonic() + pause >= deadline - 0.01
            if attempt >= MAX_ATTEMPTS or late or not transient(exc):
                raise (mark_attempts(exc, attempt) if uncertain else exc) from None
            uncertain = uncertain or not rejected(exc)
        yield commands.Sleep(pause)


def _deadline(session: Session) -> float:
    return time.monotonic() + session.settings.timeout


def _wait_active(session: Session) -> Steps[Request, dict[str, Any]]:
    deadline = time.monotonic() + CREATE_WAIT
    while True:
        try:
            answer = yield from send(
                session, commands.describe_table(session.table), _deadline(session)
            )
        except Exception as exc:
            if not is_not_found(exc):  # just created: it may not be visible yet
                fail(exc, "DescribeTable", session.location)
        else:
            if _table(answer).get("TableStatus") in identity.USABLE_STATUS:
                return answer  # type: ignore[no-any-return]
        if time.monotonic() > deadline:
            raise LedgerUnavailable(f"table {session.location} not ACTIVE after {CREATE_WAIT} s")
        yield commands.Sleep(POLL)


def read_facts(
    session: Session, deadline: float, *, create: bool, wait: bool = True
) -> Steps[Request, TableFacts]:
    """The table's description (created when asked and missing) and TTL."""
    try:
        answer = yield from send(session, commands.describe_table(session.table), deadline)
        waiting = wait and _table(answer).get("TableStatus") == "CREATING"
    except Exception as exc:
        if not is_not_found(exc):
            fail(exc, "DescribeTable", session.location)
        if not create:
            raise missing_store(f"table {session.location}") from exc
        try:
            yield from send(session, commands.create_table(session.table), deadline)
        except Exception as exc2:
            # Another opener created it first: fine, wait for it like for ours.
            if code_of(exc2) != "ResourceInUseException":
                fail(exc2, "CreateTable", session.location)
        waiting = True
    if waiting:
        answer = yield from _wait_active(session)
    try:
        ttl = yield from send(session, commands.describe_ttl(session.table), _deadline(session))
    except Exception as exc:
        fail(exc, "DescribeTimeToLive", session.location)
    ttl = ttl if isinstance(ttl, dict) else {}
    return TableFacts.read(_table(answer), ttl, server_header(answer))


def _read(
    session: Session, call: commands.Call, what: str, deadline: float
) -> Steps[Request, dict[str, Any]]:
    """One read; a vanished table makes the next operation re-check the table first. An
    answer that is no map proves nothing (read as empty, it would be an absent item)."""
    try:
        answer = yield from send(session, call, deadline)
    except Exception as exc:
        vanished(session, exc)
        fail(exc, what, session.location)
    if not isinstance(answer, dict):
        raise LedgerUnavailable(
            f"DynamoDB {what} on {session.location} answered {type(answer).__name__}, "
            "not a map: nothing was read"
        )
    return answer


def _read_genesis(session: Session, deadline: float) -> Steps[Request, bytes | None]:
    key = commands.genesis_key(session.namespace)
    answer = yield from _read(session, commands.get(session.table, key), "genesis read", deadline)
    return identity.check_genesis(answer.get("Item"))


def _ensure_genesis(session: Session, *, create: bool) -> Steps[Request, bytes]:
    """The namespace's genesis value; the first opener writes a random one."""
    found = yield from _read_genesis(session, _deadline(session))
    if found is not None:
        return found
    if not create:
        raise missing_namespace(session.namespace, f"in {session.location}")
    value = os.urandom(identity.GENESIS_BYTES)
    deadline = _deadline(session)
    try:
        yield from send(
            session, commands.put_genesis(session.table, session.namespace, value), deadline
        )
        notices.created(session.location, session.namespace)
        return value
    except Exception as exc:
        if is_conditional(exc):
            raced = identity.check_genesis(old_item(exc))
            if raced is not None:
                return raced
        elif rejected(exc):
            fail(exc, "genesis write", session.location)
        failure = exc
    # Another opener won, or our write's reply was lost: whatever is stored is THE genesis.
    stored = yield from _read_genesis(session, _deadline(session))
    if stored is None:
        fail(failure, "genesis write", session.location)
    return stored


def open_steps(session: Session) -> Steps[Request, LedgerInfo]:
    """Read the table's identity and configuration and the namespace's genesis (C6)."""
    started = time.monotonic()
    facts = yield from read_facts(session, _deadline(session), create=session.settings.create)
    identity.check_usable(facts, session.location)
    genesis = yield from _ensure_genesis(session, create=session.settings.create)
    info = identity.ledger_info(
        facts,
        genesis,
        session.settings,
        location=session.location,
        endpoint_url=session.endpoint_url,
    )
    session.facts, session.genesis, session.info = facts, genesis, info
    session.guard = Guard(session.settings.config_interval, started)
    return info


def reidentify_steps(session: Session) -> Steps[Request, None]:
    """A fresh genesis over the one this ledger opened (one conditional put): every
    instance, this one included, then fails closed (C6, after a restore)."""
    deadline = yield from checked(session)
    value = os.urandom(identity.GENESIS_BYTES)
    call = commands.replace_genesis(session.table, session.namespace, session.genesis, value)
    try:
        yield from send(session, call, deadline)
    except Exception as exc:
        if not is_conditional(exc):
            fail(exc, "reidentify", session.location)
        stored = yield from _read_genesis(session, deadline)  # ours, if a retry found it
        if stored != value:
            why = f"the namespace's genesis is {'gone' if stored is None else 'another value'}"
            raise session.guard.fail(identity.forgot(session.location, why)) from exc
    session.guard.fail(identity.forgot(session.location, "reidentify replaced the genesis"))


def _recheck_table(session: Session, deadline: float) -> Steps[Request, None]:
    """The table's identity (a restored table carries our genesis item) and its
    configuration, again."""
    try:
        # Never waits: a table being created under our name is not ours anyway.
        facts = yield from read_facts(session, deadline, create=False, wait=False)
        identity.check_usable(facts, session.location)
    except BaseException as exc:
        if exc.__cause__ is not None:  # read_facts' missing_store, from the driver's error
            vanished(session, exc.__cause__)
        session.guard.again()  # not re-checked: due at the next operation
        raise
    old, info = session.facts, session.info
    assert old is not None
    assert info is not None
    if facts.identity != old.identity:
        raise session.guard.fail(
            identity.forgot(
                session.location,
                f"the table was re-created or restored: TableId {old.table_id or '?'} "
                f"(created {old.created}) is now {facts.table_id or '?'} (created "
                f"{facts.created})",
            )
        )
    reasons = identity.refusals(facts, session.settings, session.endpoint_url)
    if reasons and info.store_id is not None:
        raise session.guard.fail(
            UnsafeStoreConfig(
                f"table {session.location} changed since this ledger opened and can no "
                f"longer back a proof: {'; '.join(reasons)}"
            )
        )


def vanished(session: Session, exc: BaseException) -> None:
    """A ``ResourceNotFoundException``: the table is gone (deleted, or being restored
    under its name), so the ledger fails for good; it never waits for a table there."""
    if is_not_found(exc):
        why = "the table is gone (ResourceNotFoundException)"
        raise session.guard.fail(identity.forgot(session.location, why)) from exc


RECHECK_POLL = 0.005  # seconds between a waiter's looks at the re-check under way


def _recheck_role(session: Session, seen: int | None) -> tuple[bool, int] | None:
    """``None``: answer (nothing due, or a re-check passed since ``seen``); else whether
    this caller runs the re-check (none under way) or waits, and the count it saw."""
    state = session.recheck.get()
    with state.lock:
        if seen is not None and state.passed != seen:
            return None
        if not state.due:
            state.due = session.guard.due()
            if not state.due:
                return None
        runs = not state.running
        state.running = True
        return runs, state.passed


def _recheck_done(session: Session, passed: bool) -> None:
    state = session.recheck.get()
    with state.lock:
        state.running = False
        if passed:
            state.due = False
            state.passed += 1


def checked(session: Session) -> Steps[Request, float]:
    """Every operation's guard: fail closed for good once the store changed; re-read
    the table when due. While a re-check is due, no caller answers until one passes:
    one caller runs it, every other waits for it within its own deadline (and runs one
    itself if that one fails). Returns the deadline."""
    session.guard.check()
    deadline = _deadline(session)
    role, seen = _recheck_role(session, None), None
    while role is not None:
        runs, seen = role
        if runs:
            try:
                yield from _recheck_table(session, deadline)
            except Exception as exc:
                _recheck_done(session, passed=False)
                fail(exc, "table check", session.location)
            _recheck_done(session, passed=True)
            break
        if time.monotonic() + RECHECK_POLL >= deadline:
            raise LedgerUnavailable(
                f"DynamoDB table check on {session.location}: another call's re-check of "
                "the table did not finish within this call's timeout; nothing was sent"
            )
        yield commands.Sleep(RECHECK_POLL)
        session.guard.check()  # the re-check waited for failed the ledger for good
        role = _recheck_role(session, seen)
    return deadline


def proven(session: Session, deadline: float, *, wrote: bool) -> Steps[Request, None]:
    """The genesis proof (C6), else fail closed for good. A read that fails after our
    write landed is an ambiguity: the id is recorded, in a store we could not name."""
    try:
        found = yield from _read_genesis(session, deadline)
    except LedgerError as exc:
        if not wrote or isinstance(exc, (LedgerClosed, UnsafeStoreConfig)):
            raise
        raise AmbiguousSpend(
            f"DynamoDB spend on {session.location}: recorded, but the namespace's genesis "
            "could not be read after it to prove the store; treat as spent"
        ) from exc
    if found != session.genesis:
        why = f"the namespace's genesis is {'gone' if found is None else 'another value'}"
        raise session.guard.fail(identity.forgot(session.location, why))


def spend_steps(
    session: Session, request_id: bytes, token: bytes, digest: bytes | None = None
) -> Steps[Request, bool]:
    """The conditional put (C10 with ``digest``), then (on True) the genesis proof."""
    deadline = yield from checked(session)
    key = ledger_key(session.namespace, request_id)
    if digest is None:
        won = yield from _put_new(session, key, token, deadline)
    else:
        won = yield from _put_as(session, key, token, digest, deadline)
    if won:
        yield from proven(session, deadline, wrote=True)
    return won


def _put_new(session: Session, key: bytes, token: bytes, deadline: float) -> Steps[Request, bool]:
    """A conditional failure is settled by the stored token (ours: an earlier attempt
    of ours landed and the resend met it, so True), a lost reply by a consistent read
    of it, else :class:`AmbiguousSpend` (C5)."""
    try:
        yield from send(session, commands.put_new(session.table, key, token), deadline)
        return True
    except Exception as exc:
        if is_conditional(exc):
            item = old_item(exc)
            if item is not None:
                return binary(item, TOKEN) == token
            if not retried(exc):
                # Sent once and refused: no write of ours exists to find (dynalite and
                # other emulators return no ALL_OLD item; this spares them a read).
                return False
        else:
            vanished(session, exc)
            if rejected(exc):
                fail(exc, "spend", session.location)
        failure = exc
    try:
        answer = yield from send(session, commands.get(session.table, key), deadline)
    except Exception as exc:
        if is_conditional(failure) or isinstance(exc, LedgerClosed):
            fail(exc, "spend (reading the record)", session.location)
        raise AmbiguousSpend(
            f"DynamoDB spend on {session.location}: the write's outcome is unknown and "
            "re-reading its token failed; it may or may not be recorded (treat as spent)"
        ) from failure
    item = answer.get("Item") if isinstance(answer, dict) else None
    if item:
        return binary(item, TOKEN) == token
    if is_conditional(failure):
        session.guard.again()
        raise LedgerUnavailable(
            f"DynamoDB spend on {session.location}: the record existed a moment ago and is "
            "gone now (the store is forgetting?)"
        ) from failure
    raise AmbiguousSpend(
        f"DynamoDB spend on {session.location}: the write's outcome is unknown and the "
        "record is not there yet; it may still land (treat as spent)"
    ) from failure


def _put_as(
    session: Session, key: bytes, token: bytes, digest: bytes, deadline: float
) -> Steps[Request, bool]:
    """True when no record or ours (same digest) exists. A conditional failure is False:
    a stored digest never changes, so no attempt of ours landed there. A lost reply is
    settled by the same put again (idempotent), else :class:`AmbiguousSpend` (C5)."""
    try:
        yield from send(session, commands.put_as(session.table, key, token, digest), deadline)
        return True
    except Exception as exc:
        if is_conditional(exc):
            return binary(old_item(exc), DIGEST) == digest
        vanished(session, exc)
        if rejected(exc):
            fail(exc, "spend_as", session.location)
        raise AmbiguousSpend(
            f"DynamoDB spend_as on {session.location}: the write's outcome is unknown and "
            "sending it again within the call's timeout failed; it may or may not be "
            "recorded (treat as spent)"
        ) from exc


def is_spent_steps(session: Session, request_id: bytes) -> Steps[Request, bool]:
    """A strongly consistent ``GetItem`` of the record's key (C3); absent, then proven."""
    deadline = yield from checked(session)
    key = ledger_key(session.namespace, request_id)
    answer = yield from _read(session, commands.exists(session.table, key), "is_spent", deadline)
    if answer.get("Item"):
        return True
    yield from proven(session, deadline, wrote=False)
    return False


Page = tuple[list[bytes], "dict[str, Any] | None"]


class ParallelScan:
    """Where each consistent parallel Scan segment over the keys under ``prefix``
    stands: the shells fetch one page of every live segment at once and stream what
    they list (bounded memory). Every page is proven."""

    def __init__(self, session: Session, prefix: bytes, keep: Callable[[bytes], bool]):
        self._session, self._prefix, self._keep = session, prefix, keep
        self._starts: dict[int, dict[str, Any] | None] = dict.fromkeys(range(SCAN_SEGMENTS))
        self._asked: list[int] = []

    @classmethod
    def ids(cls, session: Session) -> ParallelScan:
        prefix = commands.record_prefix(session.namespace)
        return cls(session, prefix, lambda raw: not is_marker(raw))

    @classmethod
    def namespaces(cls, session: Session) -> ParallelScan:
        return cls(session, commands.GENESIS_PREFIX, lambda raw: True)

    def next_pages(self) -> list[Steps[Request, Page]]:
        self._asked = list(self._starts)
        return [self._page(segment, self._starts[segment]) for segment in self._asked]

    def _page(self, segment: int, start: dict[str, Any] | None) -> Steps[Request, Page]:
        session, prefix = self._session, self._prefix
        deadline = yield from checked(session)
        call = commands.scan(session.table, [prefix], segment, start)
        answer = yield from _read(session, call, "Scan", deadline)
        yield from proven(session, deadline, wrote=False)
        items = answer.get("Items")
        if not isinstance(items, list):  # every Scan answer has them; {} is an empty body
            raise LedgerUnavailable(
                f"DynamoDB Scan on {session.location} answered without Items: the listing "
                "cannot tell an empty page from a lost one"
            )
        keys = [binary(item, commands.KEY) for item in items]
        following = answer.get("LastEvaluatedKey")
        if None in keys or not (following is None or (following and isinstance(following, dict))):
            raise LedgerUnavailable(  # dropping it would end the listing or skip an id unseen
                f"DynamoDB Scan on {session.location} answered an item without its key or a "
                "malformed LastEvaluatedKey: the listing cannot tell what it skipped"
            )
        return [k[len(prefix) :] for k in keys if k and k.startswith(prefix)], following

    def listed(self, answers: list[Page]) -> list[str]:
        found: list[str] = []
        for segment, (keys, following) in zip(self._asked, answers, strict=True):
            found += [raw.decode("utf-8") for raw in keys if raw and self._keep(raw)]
            if following is None:
                del self._starts[segment]
            else:
                self._starts[segment] = following
        return found
