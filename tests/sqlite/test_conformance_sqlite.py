"""The suite against the SQLite ledger, through the base class: one file per store label."""

from __future__ import annotations

import contextlib
import functools
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ledger_conformance import LedgerConformance, LedgerContext, offers_create
from ledger_core.opening import LocalFaults
from ledger_sqlite import AsyncSQLiteLedger, SQLiteLedger
from ledger_sqlite.testing import file_faults
from tests.restoring import AfterRestore


@pytest.fixture(scope="session")
def sqlite_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Session-scoped: equal labels must reach the same file for the whole run (C2).
    return tmp_path_factory.mktemp("sqlite-conformance")


def forget_everything(path: Path, namespace: str | None = None) -> None:
    """The store forgets, as a user emptying the records table would (like TRUNCATE):
    every id, marker and genesis of every namespace, while ledgers hold it open. The meta
    table stays: the harder form, since it held the whole file's identity before. Told a
    namespace (the store label: the factory's namespace), only that namespace's rows go,
    as a user's ``DELETE ... WHERE namespace = ?`` would."""
    conn = sqlite3.connect(path, isolation_level=None, timeout=30.0)
    try:
        if namespace is None:
            conn.execute("DELETE FROM decision_ledger")
        else:
            conn.execute("DELETE FROM decision_ledger WHERE namespace = ?", (namespace,))
    finally:
        conn.close()


class FileRestore:
    """The suite's restore hook: the whole file backed up, then restored into the live
    path, both with SQLite's own backup API (an operator's ``.backup`` / ``.restore``:
    same inode, WAL-safe, every namespace in it restored). The namespace is not needed."""

    def __init__(self, path: Path) -> None:
        self.path, self.snapshot = path, path.with_name(path.name + ".snapshot")

    def __call__(self, phase: str, namespace: str = "") -> None:
        source, target = (self.path, self.snapshot)
        if phase == "restore":
            source, target = target, source
        with (
            contextlib.closing(sqlite3.connect(source)) as src,
            contextlib.closing(sqlite3.connect(target, timeout=30.0)) as dst,
        ):
            src.backup(dst)


def after_file_restore(path: Path) -> AfterRestore:
    """The documented step after a whole-file restore: reidentify every namespace."""
    return AfterRestore(f"sqlite:///{path}", every_namespace=True)


def open_sqlite(path: Path, ctx: LedgerContext) -> Any:
    """The factory, given its file: a module-level callable, so a freshly spawned
    interpreter rebuilds it (``functools.partial`` pickles by name)."""
    create = ctx.create is not False  # None: the default
    if ctx.flavor == "async":
        return AsyncSQLiteLedger.open(path, namespace=ctx.store, create=create)
    return SQLiteLedger(path, namespace=ctx.store, create=create)


class TestSQLiteLedger(LedgerConformance):
    @pytest.fixture
    def ledger_factory(self, sqlite_dir: Path) -> Any:
        return offers_create(functools.partial(open_sqlite, sqlite_dir / "ledger.db"))

    @pytest.fixture
    def ledger_local_faults(self, sqlite_dir: Path) -> LocalFaults:
        """C4 without a network address: locked, read-only, full and removed files."""
        return file_faults(sqlite_dir / "ledger.db")

    @pytest.fixture
    def ledger_forget(self, sqlite_dir: Path) -> Callable[[], object]:
        return functools.partial(forget_everything, sqlite_dir / "ledger.db")

    @pytest.fixture
    def ledger_restore(self, sqlite_dir: Path) -> FileRestore:
        return FileRestore(sqlite_dir / "ledger.db")

    @pytest.fixture
    def ledger_after_restore(self, sqlite_dir: Path) -> AfterRestore:
        return after_file_restore(sqlite_dir / "ledger.db")
