"""The suite against a phase-1 bridge (issue 13): while a fleet moves, the ledger its hosts
use is a ledger like any other, and must keep every clause. Two SQLite files, one
namespace per store label; the bridge answers as the old store."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger_conformance import LedgerConformance, LedgerContext, offers_create
from ledger_core.bridge import AsyncBridge, Bridge
from ledger_sqlite import AsyncSQLiteLedger, SQLiteLedger
from ledger_sqlite.testing import locked
from tests.sqlite.test_conformance_sqlite import forget_everything


@pytest.fixture(scope="session")
def bridge_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bridge-conformance")


async def _async_bridge(old: Path, new: Path, namespace: str, create: bool) -> AsyncBridge:
    return await AsyncBridge.open(
        await AsyncSQLiteLedger.open(old, namespace=namespace, create=create),
        await AsyncSQLiteLedger.open(new, namespace=namespace, create=create),
        answer_as="old",
        owns=True,
    )


@contextlib.contextmanager
def _both_locked(old: Path, new: Path) -> Iterator[None]:
    with locked(old), locked(new):
        yield


def _forget_both(old: Path, new: Path, namespace: str | None = None) -> None:
    """Both stores forget (told a namespace, the store label: only its rows)."""
    forget_everything(new, namespace)
    forget_everything(old, namespace)


def open_bridge(old: Path, new: Path, ctx: LedgerContext) -> Any:
    """The factory, given both files: module-level, so the spawned-interpreter axes
    reach the bridge too (``functools.partial`` pickles by name). ``create=False``
    refuses a missing store on the old side first, so nothing is left open."""
    create = ctx.create is not False  # None: the default
    if ctx.flavor == "async":
        return _async_bridge(old, new, ctx.store, create)
    return Bridge(
        SQLiteLedger(old, namespace=ctx.store, create=create),
        SQLiteLedger(new, namespace=ctx.store, create=create),
        answer_as="old",
        owns=True,
    )


class TestPhaseOneBridge(LedgerConformance):
    @pytest.fixture
    def ledger_factory(self, bridge_dir: Path) -> Any:
        factory = functools.partial(open_bridge, bridge_dir / "old.db", bridge_dir / "new.db")
        return offers_create(factory)

    @pytest.fixture
    def ledger_local_faults(self, bridge_dir: Path) -> dict[str, Callable[[], Any]]:
        """C4 without a network address: the old store's file is locked (the new store
        answered first), or both are."""
        old, new = bridge_dir / "old.db", bridge_dir / "new.db"
        return {
            "old locked": functools.partial(locked, old),
            "both locked": functools.partial(_both_locked, old, new),
        }

    @pytest.fixture
    def ledger_forget(self, bridge_dir: Path) -> Callable[[], object]:
        return functools.partial(_forget_both, bridge_dir / "old.db", bridge_dir / "new.db")
