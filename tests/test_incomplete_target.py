"""A store whose first migration never finished refuses to open (issue 13).

Refusing only to *prove* (``store_id = None``) would not be enough: a host would still
spend there, and an id spent in the old store and not copied yet would answer ``True``
(a second run). So ``open_ledger``/``open_async_ledger`` refuse the store itself, until
the migration finishes; the migration and the tools that report on a store open it with
``allow_incomplete=True``.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ledger_core import (
    AsyncMemoryLedger,
    LedgerUnavailable,
    MemoryLedger,
    MemoryStore,
    UnsafeStoreConfig,
    migrate,
    migration_state,
    open_async_ledger,
    open_ledger,
    register_backend,
    store_id_of,
)
from ledger_core.cli import main
from ledger_core.migrate import IncompleteMigration, MigrationInterrupted, Progress
from ledger_core.opening import OpenRequest
from ledger_sqlite import SQLiteLedger
from tests.cli_stops import Plain, PlainBackend


def _stop_after_first_batch(p: Progress) -> None:
    raise KeyboardInterrupt


def _interrupted(tmp_path: Path) -> tuple[str, str]:
    old, new = SQLiteLedger(tmp_path / "old.db"), SQLiteLedger(tmp_path / "new.db")
    old.spend_many([f"i{n:03d}" for n in range(30)])
    with pytest.raises(MigrationInterrupted):
        migrate(old, new, batch=10, progress=_stop_after_first_batch)
    return f"sqlite:///{tmp_path}/old.db", f"sqlite:///{tmp_path}/new.db"


def test_an_incomplete_target_refuses_to_open_until_the_copy_finishes(tmp_path: Path) -> None:
    old, new = _interrupted(tmp_path)
    with pytest.raises(IncompleteMigration, match="incomplete migration"):
        open_ledger(new)
    # The migration itself (and reports) may open it; finishing makes it openable.
    target: Any = open_ledger(new, allow_incomplete=True)
    assert target.is_spent("i029") is False  # what a host would have been told: "not spent"
    migrate(open_ledger(old, create=False), target)
    assert open_ledger(new).is_spent("i029") is True  # type: ignore[attr-defined]


def test_the_async_opening_refuses_too(tmp_path: Path) -> None:
    _, new = _interrupted(tmp_path)

    async def scenario() -> None:
        with pytest.raises(IncompleteMigration):
            await open_async_ledger(new)
        ledger = await open_async_ledger(new, allow_incomplete=True)
        await ledger.aclose()  # type: ignore[attr-defined]

    asyncio.run(scenario())


def test_a_catch_up_run_does_not_take_a_store_out_of_service(tmp_path: Path) -> None:
    """After the hosts switched, the catch-up run (the store already continues its
    source) must not make the store refuse the hosts that restart meanwhile."""
    old, new = SQLiteLedger(tmp_path / "old.db"), SQLiteLedger(tmp_path / "new.db")
    old.spend_many([f"i{n:03d}" for n in range(30)])
    migrate(old, new)
    old.spend_many([f"late{n:03d}" for n in range(30)])
    with pytest.raises(MigrationInterrupted):
        migrate(old, new, batch=10, progress=_stop_after_first_batch)
    assert "catch-up run 2" in str(migration_state(new))
    assert store_id_of(open_ledger(f"sqlite:///{tmp_path}/new.db")) == new.store_id
    assert main(["store-id", f"sqlite:///{tmp_path}/new.db"]) == 0  # in service: its id


def test_the_cli_refuses_answers_and_reports_the_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, new = _interrupted(tmp_path)
    capsys.readouterr()
    assert main(["is-spent", new, "i029"]) == 3  # never "not spent" (exit 1)
    assert "IncompleteMigration" in capsys.readouterr().err
    assert main(["spend", new, "i029"]) == 3
    assert main(["store-id", new]) == 3  # refused with the reason: no id to switch to
    out, err = capsys.readouterr()
    assert out == ""
    assert "IncompleteMigration" in err
    assert "incomplete migration" in err


class _SecretBackend:
    """A scheme whose URL carries a password; its store holds an unfinished run."""

    store = MemoryStore()

    def open(self, request: OpenRequest) -> MemoryLedger:
        return MemoryLedger(self.store, namespace=request.namespace)

    async def open_async(self, request: OpenRequest) -> AsyncMemoryLedger:
        return AsyncMemoryLedger(self.store, namespace=request.namespace)


def test_the_refusal_shows_no_secret_and_markerless_ledgers_open() -> None:
    register_backend("secretmem", _SecretBackend())
    url = "secretmem://user:hunter2-s3cret@host/db"
    source = MemoryLedger()
    source.spend("a")
    target = open_ledger(url)
    with pytest.raises(MigrationInterrupted):
        migrate(source, target, batch=1, progress=_stop_after_first_batch)
    with pytest.raises(IncompleteMigration) as refused:
        open_ledger(url)
    assert "hunter2" not in str(refused.value)
    assert "s3cret" not in repr(refused.value)

    register_backend("nomarkers", PlainBackend())  # type: ignore[arg-type]
    assert isinstance(open_ledger("nomarkers://x"), Plain)


class _Refusing(MemoryLedger):
    """A store that refuses even reads as unsafe (as a Redis replica refuses scripts)."""

    def __init__(self, store_id: str | None, error: Exception) -> None:
        super().__init__()
        self.error = error
        if store_id is not None:
            self._info = replace(self._info, store_id=store_id, reason=None)

    def _is_spent(self, request_id: bytes) -> bool:
        raise self.error

    def _spend(self, request_id: bytes) -> bool:
        raise self.error


class _RefusingBackend:
    def open(self, request: OpenRequest) -> _Refusing:
        kind, _, proves = request.url.parts.netloc.partition(".")
        error = UnsafeStoreConfig("replica") if kind == "unsafe" else LedgerUnavailable("down")
        return _Refusing("refusing:1" if proves else None, error)

    async def open_async(self, request: OpenRequest) -> _Refusing:
        return self.open(request)


def test_a_store_that_refuses_the_check_is_served_only_when_it_refuses_everything() -> None:
    """A ledger that never proves and whose store refuses reads as unsafe opens (every
    call refuses the same way, describe() says why); any other failure of the check, or
    an unsafe refusal from a ledger that claims to prove, refuses the opening."""
    register_backend("refusing", _RefusingBackend())  # type: ignore[arg-type]
    ledger: Any = open_ledger("refusing://unsafe")
    with pytest.raises(UnsafeStoreConfig):
        ledger.spend("x")
    with pytest.raises(UnsafeStoreConfig):
        open_ledger("refusing://unsafe.proves")
    with pytest.raises(LedgerUnavailable):
        open_ledger("refusing://down")

    async def opened() -> None:
        await open_async_ledger("refusing://unsafe")
        with pytest.raises(LedgerUnavailable):
            await open_async_ledger("refusing://down")

    asyncio.run(opened())


def test_a_ledger_made_without_open_ledger_refuses_at_its_first_answer(tmp_path: Path) -> None:
    """The check lives in the base classes: a constructor (sync or async) that skipped
    the registry still refuses to answer, before any id is read or written."""
    from ledger_sqlite import AsyncSQLiteLedger

    _interrupted(tmp_path)
    direct = SQLiteLedger(tmp_path / "new.db")
    for answer in (
        lambda: direct.spend("i029"),
        lambda: direct.is_spent("i029"),
        lambda: direct.spend_as("i029", "attempt-key-0123456789"),
        lambda: direct.spend_many(["i029"]),
        lambda: direct.is_spent_many(["i029"]),
    ):
        with pytest.raises(IncompleteMigration):
            answer()

    async def scenario() -> None:
        ledger = await AsyncSQLiteLedger.open(tmp_path / "new.db")
        try:
            with pytest.raises(IncompleteMigration):
                await ledger.spend("i029")
            with pytest.raises(IncompleteMigration):
                await ledger.is_spent_many(["i029"])
        finally:
            await ledger.aclose()

    asyncio.run(scenario())
    assert SQLiteLedger(tmp_path / "old.db").spend("fresh") is True  # a complete store answers
