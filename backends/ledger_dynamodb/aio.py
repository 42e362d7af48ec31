# async-to-sync: ledger.py
# async-to-sync rename: AsyncDynamoDBLedger=DynamoDBLedger asyncio.sleep=time.sleep
# async-to-sync rename: AsyncReentrantLedgerBase=ReentrantLedgerBase
"""The DynamoDB ledger: one conditional ``PutItem`` of an attempt token per spend, then a
consistent read of the namespace's genesis (C6), on a boto3 or aiobotocore client.

Identity after open (C6): an answer that could let a call run (``spend`` True,
``is_spent`` False, a listed page) is followed, in the same operation, by a consistent
read of the namespace's genesis (random, written once, never rewritten: present now means
present since open). ``DescribeTable`` is re-read every ``config_interval`` seconds
(:mod:`.recheck`); a ``ResourceNotFoundException`` (the table is gone) fails the ledger
for good. Every operation has one deadline (``timeout`` from its start) shared by its
attempts; a request is sent again only while the answer it failed with says it may
succeed, and an outcome it leaves unknown is settled by the attempt token (C5).
"""

from __future__ import annotations

import asyncio
import functools
import os
import random
import time
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NoReturn

from ledger_core import forks, notices
from ledger_core.base import AsyncReentrantLedgerBase
from ledger_core.doctor import Check
from ledger_core.errors import (
    AmbiguousSpend,
    LedgerClosed,
    LedgerError,
    LedgerUnavailable,
    UnsafeStoreConfig,
    missing_namespace,
    missing_of,
    missing_store,
)
from ledger_core.guard import Guard
from ledger_core.ids import first_wins, id_batches, is_marker, ledger_key
from ledger_core.lazy import import_driver
from ledger_core.protocol import LedgerInfo
from ledger_core.tokens import new_token

from . import deadlines, identity, items
from .clients import carry_credentials, client_target, like
from .errors import (
    CONDITIONAL,
    THROTTLED,
    code_of,
    fail,
    is_conditional,
    is_not_found,
    lost,
    mark_attempts,
    rejected,
    returned_item,
    unavailable,
)
from .identity import TableFacts
from .items import DIGEST, GENESIS, KEY, SCAN_SEGMENTS, TOKEN, binary
from .options import MAX_ATTEMPTS, Target, per_attempt
from .recheck import Recheck

ASYNC = True

CREATE_WAIT = 120.0  # seconds a new table may take to become ACTIVE
POLL = 0.1  # seconds between DescribeTable polls while it is created
RECHECK_POLL = 0.005  # seconds between a waiter's looks at the re-check under way
BATCH = 64  # ids per spend_many batch: one deadline and one genesis proof each
PUTS_AT_ONCE = 16  # a sync spend_many's threads (an async one sends a batch's puts at once)
READS = 100  # keys per BatchGetItem (its limit)

Page = tuple[list[bytes], "dict[str, Any] | None"]

if ASYNC:
    TIMEOUT = getattr(asyncio, "timeout", None)  # 3.11+: a deadline as a context manager


class AsyncDynamoDBLedger(AsyncReentrantLedgerBase):
    """A ledger in a DynamoDB table. Open it with ``open_ledger`` / ``open_async_ledger``
    or :meth:`from_client`; one client per process (a forked child builds its own)."""

    def __init__(self, target: Target, host: Any = None) -> None:
        """Not opened yet: :meth:`open` builds its client, or uses the ``host``'s."""
        settings = target.settings
        self._table, self._settings, self._namespace = target.table, settings, settings.namespace
        self._location, self._endpoint_url = target.location, target.endpoint_url
        self._timeout, self._share = settings.timeout, per_attempt(settings.timeout)
        self._target, self._host, self._client = target, host, host
        self._owned = host is None  # a host's client is never closed by us
        self._closed = False
        self._born = forks.generation  # the process the client belongs to
        self._guard = Guard(0.0)  # failed for good (the re-check's timing is _recheck's)
        self._recheck = Recheck(settings.config_interval, time.monotonic())
        self._facts: TableFacts | None = None
        self._genesis = b""
        self._genesis_attr: dict[str, bytes] = {}  # the genesis item's value, as read
        # The per-table parameters, built once: an operation adds only its key or item.
        genesis_key = items.genesis_key(self._namespace)
        self._describe = {"TableName": target.table}
        self._put_new = items.put(target.table, items.NEW)
        self._put_as = items.put(target.table, items.NEW_OR_SAME_DIGEST, **{"#d": DIGEST})
        self._exists = items.get(target.table, b"", only_key=True)
        self._exists_many = {
            "ConsistentRead": True,
            "ProjectionExpression": "#k",
            "ExpressionAttributeNames": {"#k": KEY},
        }
        self._genesis_read = items.get(target.table, genesis_key)
        self._genesis_item = {KEY: {"B": genesis_key}}

    @classmethod
    async def open(cls, target: Target, host: Any = None) -> AsyncDynamoDBLedger:
        ledger = cls(target, host)
        try:
            if host is None:
                ledger._client = await ledger._built()
            ledger._info = await ledger._open()
        except BaseException:
            await ledger.aclose()
            raise
        return ledger

    @classmethod
    async def from_client(cls, client: Any, table: str, **options: Any) -> AsyncDynamoDBLedger:
        """A ledger on a DynamoDB client the host already has (an aiobotocore one already
        entered; never closed by us), with the URL's options (``namespace``, ``create``,
        ``durability``...)."""
        target = client_target(client, table, options)
        return await cls.open(target, client)

    @classmethod
    async def preflight(cls, target: Target) -> list[Check]:
        """``decision-ledger doctor`` before ``setup`` (``identity.preflight_checks``)."""
        import botocore

        ledger = cls(target)
        try:
            ledger._client = await ledger._built()
            facts: TableFacts | None = await ledger._read_facts(ledger._deadline(), create=False)
        except LedgerUnavailable as exc:
            if missing_of(exc) is None:
                raise
            facts = None
        finally:
            await ledger.aclose()
        version = botocore.__version__
        return identity.preflight_checks(
            facts, target.location, target.settings, target.endpoint_url, version
        )

    async def __aenter__(self) -> AsyncDynamoDBLedger:
        return self

    # -- the hot path: spend and is_spent ------------------------------------------------

    async def _spend_as(
        self, request_id: bytes, digest: bytes | None = None, batch: float | None = None
    ) -> bool:
        """The conditional put (C10 with ``digest``), then (on True) the genesis proof; in
        a batch (``spend_many``, its deadline ``batch``) the batch checked and proves."""
        deadline = await self._checked() if batch is None else batch
        key = self._key(request_id)
        token = new_token()
        item = {KEY: {"B": key}, TOKEN: {"B": token}}
        if digest is None:
            params = {**self._put_new, "Item": item}
        else:
            item[DIGEST] = {"B": digest}
            params = {
                **self._put_as,
                "Item": item,
                "ExpressionAttributeValues": {":d": item[DIGEST]},
            }
        try:
            await self._call(self._client.put_item, deadline, params)
        except Exception as exc:
            if not await self._settled(exc, key, token, digest, deadline):
                return False
        if batch is None:
            await self._prove(deadline, wrote=True)
        return True

    _spend = _spend_as  # no digest: a plain spend

    def _key(self, request_id: bytes) -> bytes:
        """The record's partition key (C7); one helper, so a static walk follows the id."""
        return ledger_key(self._namespace, request_id)

    async def _is_spent(self, request_id: bytes) -> bool:
        """A strongly consistent ``GetItem`` of the record's key (C3); absent, then proven."""
        deadline = await self._checked()
        params = {**self._exists, "Key": {KEY: {"B": self._key(request_id)}}}
        try:
            answer = await self._call(self._client.get_item, deadline, params)
        except Exception as exc:
            self._failed_read(exc, "is_spent")
        if not isinstance(answer, dict):
            raise self._not_a_map("is_spent", answer)
        if answer.get("Item"):
            return True
        await self._prove(deadline, wrote=False)
        return False

    async def _checked(self) -> float:
        """Every operation's guard, before anything is sent: failed for good stays failed;
        a forked child's first operation builds its client; the table re-check when due.
        Returns the operation's deadline."""
        if self._guard.failed is not None:
            self._guard.check()
        if self._born != forks.generation or self._closed:
            await self._reopen()  # before the deadline starts
        now = time.monotonic()
        if self._recheck.due or now >= self._recheck.next:
            await self._recheck_wait(now + self._timeout)
        return now + self._timeout

    async def _call(self, method: Any, deadline: float, params: dict[str, Any]) -> Any:
        """The client's ``method`` within ``deadline``, sent again (backing off) only while
        the failure says it may succeed; the last failure is raised, marked as retried when
        an earlier attempt may have landed (C5)."""
        if self._closed:
            raise LedgerClosed("this DynamoDB ledger is closed")
        attempt, uncertain = 0, False  # uncertain: an attempt before the last may have landed
        while True:
            attempt += 1
            now = time.monotonic()
            if now >= deadline and attempt == 1:
                raise LedgerUnavailable(
                    f"DynamoDB {getattr(method, '__name__', 'call')} on {self._location}: "
                    f"the call's timeout "
                    f"({self._timeout:g} s) ran out before it could be sent"
                )
            try:
                if ASYNC:
                    # The whole request, a trickled reply too, is cancelled at the deadline:
                    # asyncio.timeout (3.11) needs no task of its own, wait_for (3.10) does.
                    if TIMEOUT is None:
                        return await asyncio.wait_for(method(**params), deadline - now)
                    async with TIMEOUT(deadline - now):
                        return await method(**params)
                else:
                    # botocore's timeouts bound each read, not a reply: a watchdog does.
                    with deadlines.bounded(min(deadline, now + self._share)):
                        return method(**params)
            except Exception as exc:
                # Sent again only if that may succeed (botocore's standard conditions): an
                # AWS answer when throttled or a 5xx (read here: a spent id's refusal is one),
                # or a lost or timed-out connection.
                response: Any = getattr(exc, "response", None)
                error = response.get("Error") if isinstance(response, dict) else None
                code = error.get("Code") if isinstance(error, dict) else None
                if isinstance(code, str):
                    meta = response.get("ResponseMetadata")
                    status = meta.get("HTTPStatusCode") if isinstance(meta, dict) else None
                    again = code in THROTTLED or (isinstance(status, int) and status >= 500)
                else:
                    again = lost(exc)
                pause = random.uniform(0.0, min(0.05 * 2**attempt, 1.0))
                late = time.monotonic() + pause >= deadline - 0.01
                if attempt >= MAX_ATTEMPTS or late or not again:
                    raise (mark_attempts(exc, attempt) if uncertain else exc) from None
                uncertain = uncertain or not rejected(exc)
            await asyncio.sleep(pause)

    async def _prove(self, deadline: float, *, wrote: bool) -> None:
        """The genesis proof (C6): the namespace's genesis as this ledger opened it."""
        try:
            answer = await self._call(self._client.get_item, deadline, self._genesis_read)
        except Exception as exc:
            answer = exc
        item = answer.get("Item") if isinstance(answer, dict) else None
        if not (isinstance(item, dict) and item.get(GENESIS) == self._genesis_attr):
            self._disproven(answer, wrote)

    # -- what a failed or refused call means ---------------------------------------------

    async def _settled(
        self, exc: Exception, key: bytes, token: bytes, digest: bytes | None, deadline: float
    ) -> bool:
        """Whether the put that failed with ``exc`` is ours after all. A conditional failure
        is settled by the stored token (ours: an earlier attempt of ours landed and the
        resend met it); a ``spend_as`` one is False (a stored digest never changes, so no
        attempt of ours landed there); a lost reply by a consistent read of the token;
        else :class:`AmbiguousSpend` (C5)."""
        response: Any = getattr(exc, "response", None)  # read here: a spent id's refusal is one
        error = response.get("Error") if isinstance(response, dict) else None
        refused = isinstance(error, dict) and error.get("Code") == CONDITIONAL
        if refused:
            if digest is not None:
                return False
            stored = response.get("Item")
            if isinstance(stored, dict):  # ALL_OLD: DynamoDB sends it, emulators may not
                return stored.get(TOKEN) == {"B": token}
            meta = response.get("ResponseMetadata")
            attempts = meta.get("RetryAttempts") if isinstance(meta, dict) else None
            if isinstance(attempts, int) and attempts <= 0:
                # Sent once and refused: no write of ours exists to find (dynalite and
                # other emulators return no ALL_OLD item; this spares them a read).
                return False
        else:
            self._vanished(exc)
            what = "spend" if digest is None else "spend_as"
            if rejected(exc):
                fail(exc, what, self._location)
            if digest is not None:  # the same put was sent again within the deadline
                raise AmbiguousSpend(
                    f"DynamoDB spend_as on {self._location}: the write's outcome is unknown "
                    "and sending it again within the call's timeout failed; it may or may "
                    "not be recorded (treat as spent)"
                ) from exc
        try:
            answer = await self._call(self._client.get_item, deadline, items.get(self._table, key))
        except Exception as again:
            if refused or isinstance(again, LedgerClosed):
                fail(again, "spend (reading the record)", self._location)
            raise AmbiguousSpend(
                f"DynamoDB spend on {self._location}: the write's outcome is unknown and "
                "re-reading its token failed; it may or may not be recorded (treat as spent)"
            ) from exc
        item = answer.get("Item") if isinstance(answer, dict) else None
        if item:
            return binary(item, TOKEN) == token
        if refused:
            self._recheck.again()
            raise LedgerUnavailable(
                f"DynamoDB spend on {self._location}: the record existed a moment ago and "
                "is gone now (the store is forgetting?)"
            ) from exc
        raise AmbiguousSpend(
            f"DynamoDB spend on {self._location}: the write's outcome is unknown and the "
            "record is not there yet; it may still land (treat as spent)"
        ) from exc

    def _disproven(self, answer: Any, wrote: bool) -> NoReturn:
        """The genesis read did not answer this ledger's genesis: fail closed, for good
        when it answered another or none. A read that failed after our write landed is an
        ambiguity: the id is recorded, in a store we could not name."""
        try:
            found = self._genesis_of(answer)
        except LedgerError as exc:
            if not wrote or isinstance(exc, (LedgerClosed, UnsafeStoreConfig)):
                raise
            raise AmbiguousSpend(
                f"DynamoDB spend on {self._location}: recorded, but the namespace's genesis "
                "could not be read after it to prove the store; treat as spent"
            ) from exc
        why = f"the namespace's genesis is {'gone' if found is None else 'another value'}"
        raise self._guard.fail(identity.forgot(self._location, why))

    def _genesis_of(self, answer: Any) -> bytes | None:
        """The genesis value in a genesis read's answer, or its failure as a ledger error."""
        if isinstance(answer, BaseException):
            self._failed_read(answer, "genesis read")
        if not isinstance(answer, dict):
            raise self._not_a_map("genesis read", answer)
        return identity.check_genesis(answer.get("Item"))

    def _failed_read(self, exc: BaseException, what: str) -> NoReturn:
        self._vanished(exc)
        fail(exc, what, self._location)

    def _vanished(self, exc: BaseException) -> None:
        """A ``ResourceNotFoundException``: the table is gone (deleted, or being restored
        under its name), so the ledger fails for good; it never waits for a table there."""
        if is_not_found(exc):
            why = "the table is gone (ResourceNotFoundException)"
            raise self._guard.fail(identity.forgot(self._location, why)) from exc

    def _not_a_map(self, what: str, answer: Any) -> LedgerUnavailable:
        """An answer that is no map proves nothing (read as empty, it would be an absent
        item)."""
        return LedgerUnavailable(
            f"DynamoDB {what} on {self._location} answered {type(answer).__name__}, "
            "not a map: nothing was read"
        )

    # -- open, the table re-check, a forked child -----------------------------------------

    def _deadline(self) -> float:
        return time.monotonic() + self._timeout

    async def _open(self) -> LedgerInfo:
        """Read the table's identity and configuration and the namespace's genesis (C6)."""
        started, create = time.monotonic(), self._settings.create
        facts = await self._read_facts(self._deadline(), create=create)
        identity.check_usable(facts, self._location)
        genesis = await self._ensure_genesis(create=create)
        info = identity.ledger_info(
            facts, genesis, self._settings, location=self._location, endpoint_url=self._endpoint_url
        )
        self._facts, self._genesis, self._genesis_attr = facts, genesis, {"B": genesis}
        self._recheck.next = started + self._settings.config_interval
        return info

    async def _read_facts(self, deadline: float, *, create: bool, wait: bool = True) -> TableFacts:
        """The table's description (created when asked and missing) and TTL."""
        try:
            answer = await self._call(self._client.describe_table, deadline, self._describe)
            waiting = wait and identity.table_of(answer).get("TableStatus") == "CREATING"
        except Exception as exc:
            if not is_not_found(exc):
                fail(exc, "DescribeTable", self._location)
            if not create:
                raise missing_store(f"table {self._location}") from exc
            try:
                await self._call(
                    self._client.create_table, deadline, items.create_table(self._table)
                )
            except Exception as exc2:
                # Another opener created it first: fine, wait for it like for ours.
                if code_of(exc2) != "ResourceInUseException":
                    fail(exc2, "CreateTable", self._location)
            waiting = True
        if waiting:
            answer = await self._wait_active()
        try:
            ttl = await self._call(
                self._client.describe_time_to_live, self._deadline(), self._describe
            )
        except Exception as exc:
            fail(exc, "DescribeTimeToLive", self._location)
        ttl = ttl if isinstance(ttl, dict) else {}
        return TableFacts.read(identity.table_of(answer), ttl, identity.server_header(answer))

    async def _wait_active(self) -> dict[str, Any]:
        deadline = time.monotonic() + CREATE_WAIT
        while True:
            try:
                answer = await self._call(
                    self._client.describe_table, self._deadline(), self._describe
                )
            except Exception as exc:
                if not is_not_found(exc):  # just created: it may not be visible yet
                    fail(exc, "DescribeTable", self._location)
            else:
                if identity.table_of(answer).get("TableStatus") in identity.USABLE_STATUS:
                    return answer  # type: ignore[no-any-return]
            if time.monotonic() > deadline:
                raise LedgerUnavailable(f"table {self._location} not ACTIVE after {CREATE_WAIT} s")
            await asyncio.sleep(POLL)

    async def _read_genesis(self, deadline: float) -> bytes | None:
        try:
            answer = await self._call(self._client.get_item, deadline, self._genesis_read)
        except Exception as exc:
            answer = exc
        return self._genesis_of(answer)

    async def _ensure_genesis(self, *, create: bool) -> bytes:
        """The namespace's genesis value; the first opener writes a random one."""
        found = await self._read_genesis(self._deadline())
        if found is not None:
            return found
        if not create:
            raise missing_namespace(self._namespace, f"in {self._location}")
        value = os.urandom(identity.GENESIS_BYTES)
        params = {**self._put_new, "Item": {**self._genesis_item, GENESIS: {"B": value}}}
        try:
            await self._call(self._client.put_item, self._deadline(), params)
            notices.created(self._location, self._namespace)
            return value
        except Exception as exc:
            if is_conditional(exc):  # the refusal may carry the stored genesis (ALL_OLD)
                raced = identity.check_genesis(returned_item(exc))
                if raced is not None:
                    return raced
            elif rejected(exc):
                fail(exc, "genesis write", self._location)
            failure = exc
        # Another opener won, or our write's reply was lost: whatever is stored is THE genesis.
        stored = await self._read_genesis(self._deadline())
        if stored is None:
            fail(failure, "genesis write", self._location)
        return stored

    async def _recheck_wait(self, deadline: float) -> None:
        """No caller answers while a re-check is due (:mod:`.recheck`): run it, or wait."""
        state = self._recheck
        role, seen = state.role(None), None
        while role is not None:
            runs, seen = role
            if runs:
                passed = False
                try:
                    await self._recheck_table(deadline)
                    passed = True
                except Exception as exc:
                    fail(exc, "table check", self._location)
                finally:
                    state.done(passed)
                return
            if time.monotonic() + RECHECK_POLL >= deadline:
                raise LedgerUnavailable(
                    f"DynamoDB table check on {self._location}: another call's re-check of "
                    "the table did not finish within this call's timeout; nothing was sent"
                )
            await asyncio.sleep(RECHECK_POLL)
            self._guard.check()  # the re-check waited for failed the ledger for good
            role = state.role(seen)

    async def _recheck_table(self, deadline: float) -> None:
        """The table's identity (a restored table carries our genesis item) and its
        configuration, again."""
        try:
            # Never waits: a table being created under our name is not ours anyway.
            facts = await self._read_facts(deadline, create=False, wait=False)
            identity.check_usable(facts, self._location)
        except BaseException as exc:
            if exc.__cause__ is not None:  # _read_facts' missing_store, from the driver's error
                self._vanished(exc.__cause__)
            raise
        old = self._facts
        assert old is not None
        if facts.identity != old.identity:
            raise self._guard.fail(
                identity.forgot(
                    self._location,
                    f"the table was re-created or restored: TableId {old.table_id or '?'} "
                    f"(created {old.created}) is now {facts.table_id or '?'} (created "
                    f"{facts.created})",
                )
            )
        reasons = identity.refusals(facts, self._settings, self._endpoint_url)
        if reasons and self._info.store_id is not None:
            raise self._guard.fail(
                UnsafeStoreConfig(
                    f"table {self._location} changed since this ledger opened and can no "
                    f"longer back a proof: {'; '.join(reasons)}"
                )
            )

    async def _reopen(self) -> None:
        """A forked child's first operation: a client of its own (the parent's sockets are
        never shared, nor closed here) and a re-check state of its own."""
        if self._closed:
            raise LedgerClosed("this DynamoDB ledger is closed")
        client = await self._built()
        if self._born == forks.generation:  # another thread or task of this child was first
            await client.close()
            return
        self._client, self._owned, self._born = client, True, forks.generation
        self._recheck = self._recheck.renewed()

    async def _built(self) -> Any:
        """A client of the ledger's own: for its URL (its requests armed with their
        deadlines), or in a forked child of a host's ledger one like the host's, with its
        configuration and credentials."""
        host, target = self._host, self._target
        profile = target.profile if host is None else None
        kwargs = target.client_kwargs() if host is None else like(host)
        try:
            if ASYNC:
                needs = "the async DynamoDB ledger needs aiobotocore"
                aiobotocore = import_driver("dynamodb", needs, "aiobotocore.session")
                session = aiobotocore.AioSession(profile=profile)
                client = await session.create_client("dynamodb", **kwargs).__aenter__()
            else:
                boto3 = import_driver("dynamodb", "the DynamoDB ledger needs boto3", "boto3")
                session = boto3.session.Session(profile_name=profile)
                client = session.client("dynamodb", **kwargs)
                if host is None:
                    deadlines.install(client)
        except Exception as exc:
            raise unavailable(exc, "client setup", self._location) from exc
        return client if host is None else carry_credentials(host, client)

    # -- the rest of the ledger ----------------------------------------------------------

    async def spend_many(self, request_ids: Sequence[str]) -> list[bool]:
        """One answer per id, in order, each what ``spend`` would say (a repeat: False):
        ``BATCH`` ids at a time, one conditional put per distinct id (sent at once), each
        settled as a spend's is (C5); then one genesis read proves them (C6). An id whose
        outcome stays unknown fails the call (:class:`AmbiguousSpend` once any id of its
        batch was recorded): nothing is guessed."""
        batches = id_batches(request_ids, BATCH)
        return [won for batch in batches for won in await self._spend_batch(batch)]

    async def _spend_batch(self, ids: list[bytes]) -> list[bool]:
        deadline = await self._checked()
        distinct = list(dict.fromkeys(ids))
        outcomes: list[Any]
        if ASYNC:
            puts = (self._spend_as(raw, None, deadline) for raw in distinct)
            outcomes = await asyncio.gather(*puts, return_exceptions=True)
        else:
            # Threads, each waiting on its own put; every outcome is collected.
            with ThreadPoolExecutor(min(PUTS_AT_ONCE, len(distinct))) as pool:
                sent = [pool.submit(self._spend_as, raw, None, deadline) for raw in distinct]
            outcomes = [put.exception() or put.result() for put in sent]
        won = {raw for raw, outcome in zip(distinct, outcomes, strict=True) if outcome is True}
        failed = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
        if failed:
            if won or not isinstance(failed[0], LedgerError):
                raise AmbiguousSpend(
                    f"DynamoDB spend_many on {self._location}: {len(failed)} of "
                    f"{len(distinct)} puts failed and {len(won)} recorded their id; the "
                    "batch's ids may be recorded (treat them as spent)"
                ) from failed[0]
            raise failed[0]
        if won:
            await self._prove(deadline, wrote=True)
        return first_wins(ids, won)

    async def is_spent_many(self, request_ids: Sequence[str]) -> list[bool]:
        """One answer per id, in order: ``BatchGetItem`` of up to ``READS`` keys with
        consistent reads (unprocessed keys asked again within the deadline), then, when an
        id is absent, the genesis read after it (C6: a ``BatchGetItem`` reads its keys in
        no stated order, so a genesis in the same request would prove nothing)."""
        batches = id_batches(request_ids, READS)
        return [spent for batch in batches for spent in await self._read_batch(batch)]

    async def _read_batch(self, ids: list[bytes]) -> list[bool]:
        deadline = await self._checked()
        keys = [self._key(raw) for raw in ids]
        wanted: list[Any] = [{KEY: {"B": key}} for key in dict.fromkeys(keys)]
        found: set[bytes | None] = set()
        attempt = 0
        while wanted:
            params = {"RequestItems": {self._table: {**self._exists_many, "Keys": wanted}}}
            try:
                answer = await self._call(self._client.batch_get_item, deadline, params)
            except Exception as exc:
                self._failed_read(exc, "is_spent_many")
            read = items.batch_read(answer, self._table)
            if read is None:
                raise LedgerUnavailable(
                    f"DynamoDB is_spent_many on {self._location} answered without its "
                    "Responses or with malformed UnprocessedKeys: nothing was read"
                )
            got, wanted = read
            named = [binary(item, KEY) for item in got]
            if None in named:  # taken as absent, a spent id would read as not spent
                raise LedgerUnavailable(
                    f"DynamoDB is_spent_many on {self._location} answered an item without "
                    "its key: which id it is cannot be told"
                )
            found.update(named)
            attempt += 1
            pause = min(0.05 * 2**attempt, 1.0)
            if wanted and time.monotonic() + pause >= deadline:
                raise LedgerUnavailable(
                    f"DynamoDB is_spent_many on {self._location}: {len(wanted)} keys still "
                    "unprocessed (throttled) when the call's timeout ran out"
                )
            if wanted:
                await asyncio.sleep(pause)
        answers = [key in found for key in keys]
        if not all(answers):
            await self._prove(deadline, wrote=False)
        return answers

    async def reidentify(self) -> None:
        """``Reidentifiable``: one conditional put over the genesis this ledger opened."""
        deadline = await self._checked()
        value = os.urandom(identity.GENESIS_BYTES)
        params = {
            **items.put(self._table, items.SAME_GENESIS, **{"#g": GENESIS}),
            "Item": {**self._genesis_item, GENESIS: {"B": value}},
            "ExpressionAttributeValues": {":g": self._genesis_attr},
        }
        try:
            await self._call(self._client.put_item, deadline, params)
        except Exception as exc:
            if not is_conditional(exc):
                fail(exc, "reidentify", self._location)
            stored = await self._read_genesis(deadline)  # ours, if a retry found it
            if stored != value:
                why = f"the namespace's genesis is {'gone' if stored is None else 'another value'}"
                raise self._guard.fail(identity.forgot(self._location, why)) from exc
        self._guard.fail(identity.forgot(self._location, "reidentify replaced the genesis"))

    def spent_ids(self) -> AsyncIterator[str]:
        """Every id spent in this namespace, streamed from parallel consistent Scans."""
        return self._listed(items.record_prefix(self._namespace), ids=True)

    def namespaces(self) -> AsyncIterator[str]:
        """Every namespace of this table, each once, streamed."""
        return self._listed(items.GENESIS_PREFIX, ids=False)

    async def _listed(self, prefix: bytes, *, ids: bool) -> AsyncIterator[str]:
        """The keys under ``prefix``: one page of every live Scan segment at once, streamed
        (bounded memory); markers are no ids."""
        starts: dict[int, dict[str, Any] | None] = dict.fromkeys(range(SCAN_SEGMENTS))
        while starts:
            asked = list(starts)
            pages = [functools.partial(self._page, prefix, s, starts[s]) for s in asked]
            answers: list[Any]
            if ASYNC:
                answers = await asyncio.gather(*(page() for page in pages))
            else:
                # A thread per live segment: their pages at once.
                with ThreadPoolExecutor(len(pages)) as pool:
                    answers = list(pool.map(lambda page: page(), pages))
            for segment, (keys, following) in zip(asked, answers, strict=True):
                for raw in keys:
                    if raw and not (ids and is_marker(raw)):
                        yield raw.decode("utf-8")
                if following is None:
                    del starts[segment]
                else:
                    starts[segment] = following

    async def _page(self, prefix: bytes, segment: int, start: dict[str, Any] | None) -> Page:
        """One proven page of one segment: its keys under ``prefix``, and where it goes on."""
        deadline = await self._checked()
        try:
            answer = await self._call(
                self._client.scan, deadline, items.scan(self._table, [prefix], segment, start)
            )
        except Exception as exc:
            self._failed_read(exc, "Scan")
        if not isinstance(answer, dict):
            raise self._not_a_map("Scan", answer)
        await self._prove(deadline, wrote=False)
        found = answer.get("Items")
        if not isinstance(found, list):  # every Scan answer has them; {} is an empty body
            raise LedgerUnavailable(
                f"DynamoDB Scan on {self._location} answered without Items: the listing "
                "cannot tell an empty page from a lost one"
            )
        keys = [binary(item, KEY) for item in found]
        following = answer.get("LastEvaluatedKey")
        if None in keys or not (following is None or (following and isinstance(following, dict))):
            raise LedgerUnavailable(  # dropping it would end the listing or skip an id unseen
                f"DynamoDB Scan on {self._location} answered an item without its key or a "
                "malformed LastEvaluatedKey: the listing cannot tell what it skipped"
            )
        return [k[len(prefix) :] for k in keys if k and k.startswith(prefix)], following

    def doctor_checks(self) -> list[Check]:
        """From the facts read at open (no I/O)."""
        import botocore

        assert self._facts is not None  # read at open
        return identity.doctor_checks(
            self._facts, self._info, self._settings, self._endpoint_url, botocore.__version__
        )

    async def aclose(self) -> None:
        """Close the client if it is ours, in its own process (a forked child never closes
        its parent's)."""
        first, self._closed = not self._closed, True
        if first and self._owned and self._client is not None and self._born == forks.generation:
            await self._client.close()
