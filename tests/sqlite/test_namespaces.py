"""``namespaces()`` (``NamespaceListing``): every namespace of the file, each once."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from ledger_core import UnsafeStoreConfig
from ledger_core.ids import marker_id
from ledger_core.protocol import NamespaceListing
from ledger_sqlite import AsyncSQLiteLedger, SQLiteLedger

# Names that sort, split or compare badly if anything treated them as other than text.
NAMES = ["a", "a b", "a:b", "A", "b", "é", "ns/with/slashes", "z" * 200, "%", "_"]


def _fill(path: Path) -> None:
    for name in NAMES:
        with SQLiteLedger(path, namespace=name) as ledger:
            ledger.spend(f"id-in-{name}")
            ledger.spend("shared-id")


@pytest.mark.parametrize("page", [1, 3, 100])
def test_every_namespace_once_in_pages(tmp_path: Path, page: int) -> None:
    path = tmp_path / "l.db"
    _fill(path)
    with SQLiteLedger(path, namespace="b") as ledger:
        assert isinstance(ledger, NamespaceListing)
        listed = list(ledger.namespaces(page=page))
    assert listed == sorted(NAMES)


def test_an_opened_namespace_is_listed_even_when_empty(tmp_path: Path) -> None:
    """Its genesis is its first row: every namespace a ledger opened is listed."""
    path = tmp_path / "l.db"
    _fill(path)
    opened = list(NAMES)
    for own in ("0-first", "m-middle", "\uffff-last"):
        opened.append(own)
        for page in (1, 4, 100):
            with SQLiteLedger(path, namespace=own) as ledger:
                listed = list(ledger.namespaces(page=page))
            assert listed == sorted(opened), (own, page)
    with SQLiteLedger(tmp_path / "empty.db", namespace="solo") as alone:
        assert list(alone.namespaces()) == ["solo"]


def test_a_namespace_holding_only_markers_is_listed(tmp_path: Path) -> None:
    """A marker is a record (a migration's lineage): its namespace is moved too."""
    path = tmp_path / "l.db"
    with SQLiteLedger(path, namespace="moved") as ledger:
        ledger.spend_marker(marker_id("migrated-from", "sqlite:old"))
        assert list(ledger.spent_ids()) == []
    with SQLiteLedger(path, namespace="other") as other:
        assert list(other.namespaces()) == ["moved", "other"]


def test_async_namespaces(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    _fill(path)

    async def go() -> list[str]:
        ledger = await AsyncSQLiteLedger.open(path, namespace="own")
        try:
            return [name async for name in ledger.namespaces(page=2)]
        finally:
            await ledger.aclose()

    assert asyncio.run(go()) == sorted([*NAMES, "own"])


def test_a_store_that_forgot_lists_nothing(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    _fill(path)
    ledger = SQLiteLedger(path)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("DELETE FROM decision_ledger WHERE namespace = 'default'")
    other.close()
    with pytest.raises(UnsafeStoreConfig, match="forgot"):
        list(ledger.namespaces())
    ledger.close()
