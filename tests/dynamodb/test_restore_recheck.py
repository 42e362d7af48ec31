"""A table restored to its own name (deleted, then created again with a backup's items)
carries the namespace's genesis item, so only the table re-check (``config_interval``)
can see it (issue 37). When that re-check is due, EVERY caller waits for one (its own
DescribeTable, within its own deadline), none answers under the old ``store_id``
meanwhile; and a table that vanished (``ResourceNotFoundException``) fails the ledger
for good. ``config_interval=0``: due at every call, so callers released together by a
barrier all meet a due re-check."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import botocore.exceptions
import pytest

from ledger_core import open_async_ledger, open_ledger
from ledger_core.errors import LedgerError, UnsafeStoreConfig
from ledger_dynamodb import items
from tests.dynamodb import tools
from tests.servers import dynamodb as servers

dynamodb_target = tools.on_emulators(servers.DYNALITE)

CALLERS = 8


def _items(admin: Any, table: str) -> list[dict[str, Any]]:
    """A backup: every item, as a consistent Scan reads it."""
    pages = admin.get_paginator("scan").paginate(TableName=table, ConsistentRead=True)
    return [item for page in pages for item in page.get("Items", [])]


def _delete_table(admin: Any, table: str) -> None:
    with contextlib.suppress(botocore.exceptions.ClientError):
        admin.update_table(TableName=table, DeletionProtectionEnabled=False)
    tools._wait(lambda: tools._status(admin, table) in ("ACTIVE", None), "table update")
    admin.delete_table(TableName=table)
    tools._wait(lambda: tools._status(admin, table) is None, "table deletion")


def _restore_to_same_name(admin: Any, table: str, backup: list[dict[str, Any]]) -> None:
    """The table deleted and created again under its name with the backup's items."""
    _delete_table(admin, table)
    admin.create_table(**items.create_table(table))
    tools._wait(lambda: tools._status(admin, table) == "ACTIVE", "table creation")
    for item in backup:
        admin.put_item(TableName=table, Item=item)


def _setup(url: str) -> tuple[Any, str, dict[str, str]]:
    opts = tools.ledger_options(url, config_interval="0")
    return tools.admin_client(url), tools.url_parts(url)[0], opts


def _answers(outcomes: list[object]) -> list[object]:
    """What each caller got: an answer (a bool) is a caller that did not wait."""
    bad = [o for o in outcomes if not isinstance(o, UnsafeStoreConfig)]
    assert not bad, f"{len(bad)} of {len(outcomes)} callers answered unchecked: {bad!r}"
    return outcomes


def test_every_caller_waits_for_a_due_recheck_sync(own_table: str) -> None:
    admin, table, opts = _setup(own_table)
    ledger: Any = open_ledger(own_table, **opts)
    try:
        assert ledger.spend("before") is True
        backup = _items(admin, table)
        assert ledger.spend("after") is True
        _restore_to_same_name(admin, table, backup)
        barrier = threading.Barrier(CALLERS)

        def call(n: int) -> object:
            barrier.wait()
            try:
                return ledger.is_spent("after") if n % 2 else ledger.spend("before")
            except LedgerError as exc:
                return exc

        with ThreadPoolExecutor(CALLERS) as pool:
            _answers(list(pool.map(call, range(CALLERS))))
        with pytest.raises(UnsafeStoreConfig, match="re-created or restored"):
            ledger.is_spent("after")  # and it stays failed
    finally:
        ledger.close()
        admin.close()


def test_every_caller_waits_for_a_due_recheck_async(own_table: str) -> None:
    admin, table, opts = _setup(own_table)

    async def main() -> None:
        ledger: Any = await open_async_ledger(own_table, **opts)
        try:
            assert await ledger.spend("before") is True
            backup = await asyncio.to_thread(_items, admin, table)
            assert await ledger.spend("after") is True
            await asyncio.to_thread(_restore_to_same_name, admin, table, backup)
            go = asyncio.Event()

            async def call(n: int) -> object:
                await go.wait()
                try:
                    return await (ledger.is_spent("after") if n % 2 else ledger.spend("before"))
                except LedgerError as exc:
                    return exc

            tasks = [asyncio.create_task(call(n)) for n in range(CALLERS)]
            await asyncio.sleep(0)  # every task waits on the event: released together
            go.set()
            _answers(list(await asyncio.gather(*tasks)))
        finally:
            await ledger.aclose()

    try:
        asyncio.run(main())
    finally:
        admin.close()


@pytest.mark.parametrize("flavor", ["sync", "async"])
def test_a_vanished_table_fails_the_ledger_for_good(own_table: str, flavor: str) -> None:
    admin, table, _opts = _setup(own_table)
    opts = tools.ledger_options(own_table, config_interval="1000")

    async def main() -> None:
        ledger: Any = await open_async_ledger(own_table, **opts)
        try:
            await calls(lambda method, *args: getattr(ledger, method)(*args))
        finally:
            await ledger.aclose()

    async def calls(call: Any) -> None:
        async def run(method: str, *args: str) -> object:
            value = call(method, *args)
            return await value if asyncio.iscoroutine(value) else value

        assert await run("spend", "x") is True
        await asyncio.to_thread(_delete_table, admin, table)
        with pytest.raises(UnsafeStoreConfig, match="ResourceNotFound"):
            await run("is_spent", "x")
        admin.create_table(**items.create_table(table))
        tools._wait(lambda: tools._status(admin, table) == "ACTIVE", "table creation")
        for method in ("spend", "is_spent", "spend"):  # a table there again: still failed
            with pytest.raises(UnsafeStoreConfig, match="ResourceNotFound"):
                await run(method, "y")

    try:
        if flavor == "async":
            asyncio.run(main())
        else:
            ledger: Any = open_ledger(own_table, **opts)
            try:
                asyncio.run(calls(lambda method, *args: getattr(ledger, method)(*args)))
            finally:
                ledger.close()
    finally:
        admin.close()


def test_callers_wait_for_one_recheck_not_each_their_own(own_table: str) -> None:
    """A due re-check is run once, by one caller, while the others wait for it: a
    re-check per caller (hundreds of DescribeTable at once, once a minute) made 256
    concurrent tasks run out of time on a loaded emulator. The re-check's DescribeTable
    is held until every other caller is waiting (a poll each), then let through."""
    opts = tools.ledger_options(own_table, config_interval="1000")
    ledger: Any = open_ledger(own_table, **opts)
    described: list[str] = []
    waiting: set[str] = set()
    changed = threading.Condition()
    state = ledger._recheck
    told = state.role

    def role(seen: int | None) -> Any:
        answer = told(seen)
        if answer is not None and not answer[0]:  # told to wait: it looks again and again
            with changed:
                waiting.add(threading.current_thread().name)
                changed.notify_all()
        return answer

    def hold(call: tools.Call, perform: tools.Perform) -> Any:
        if call.op == "describe_table":
            described.append(threading.current_thread().name)
            with changed:
                assert changed.wait_for(lambda: len(waiting) >= CALLERS - 1, timeout=5.0)
        return perform(call)

    try:
        assert ledger.spend("before") is True
        tools.inject(ledger, hold)
        state.role = role
        state.again()  # the re-check is due now
        start = threading.Barrier(CALLERS)

        def call(n: int) -> object:
            start.wait()
            return ledger.spend("before") if n % 2 else ledger.is_spent("before")

        with ThreadPoolExecutor(CALLERS) as pool:
            answers = list(pool.map(call, range(CALLERS)))
        assert answers == [n % 2 == 0 for n in range(CALLERS)]
        assert len(described) == 1, described
        assert len(waiting) == CALLERS - 1
    finally:
        ledger.close()


class _HeldDescribe:
    """An async client whose first ``DescribeTable`` waits until cancelled."""

    def __init__(self, real: Any) -> None:
        self.real, self.held = real, asyncio.Event()

    def __getattr__(self, op: str) -> Any:
        return getattr(self.real, op)

    async def describe_table(self, **params: Any) -> Any:
        if not self.held.is_set():
            self.held.set()
            await asyncio.sleep(60)
        return await self.real.describe_table(**params)


def test_a_cancelled_recheck_lets_the_next_caller_run_one(
    dynamodb_url: str, namespace: str
) -> None:
    """A task cancelled while it runs the re-check must not leave it "under way": every
    later caller would wait for a re-check nobody runs, and fail at its deadline."""
    opts = tools.ledger_options(dynamodb_url, config_interval="0")

    async def main() -> None:
        ledger: Any = await open_async_ledger(dynamodb_url, namespace=namespace, **opts)
        real = ledger._client
        try:
            ledger._client = held = _HeldDescribe(real)
            first = asyncio.create_task(ledger.spend("first"))
            await asyncio.wait_for(held.held.wait(), 10)  # it runs the re-check now
            first.cancel()
            with pytest.raises(asyncio.CancelledError):
                await first
            assert await ledger.spend("next") is True  # its own re-check, in time
        finally:
            ledger._client = real
            await ledger.aclose()

    asyncio.run(main())
