"""``namespaces()`` (issue 13, ``NamespaceListing``): every namespace of the table, once."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from psycopg import sql

from ledger_core.errors import UnsafeStoreConfig
from ledger_core.ids import marker_id
from ledger_core.protocol import NamespaceListing
from tests.flavors import Flavored

from .conftest import Opener


def namespaces(ledger: Flavored) -> list[str]:
    return ledger.collect(ledger.ledger.namespaces())


def test_every_namespace_once_own_included(open_pg: Opener) -> None:
    names = ["default", "a", "a/b", "ü-ns", "x\u0000y", "zz " * 20]
    ledgers = {name: open_pg(namespace=name) for name in names}
    for i, name in enumerate(names[1:]):
        assert ledgers[name].spend(f"id-{i}") is True
    ledgers["a"].spend("more")
    listed = namespaces(ledgers["a"])
    assert len(listed) == len(set(listed))
    # Each namespace has its genesis row once opened ("default" holds no record), and
    # an older table's genesis (0xFF) is nobody's namespace.
    assert sorted(listed) == sorted(names)
    if ledgers["a"].loop is None:
        assert isinstance(ledgers["a"].ledger, NamespaceListing)


def test_a_namespace_with_only_markers_is_listed(open_pg: Opener) -> None:
    ledger = open_pg(namespace="markers-only")
    assert ledger.run(ledger.ledger.spend_marker(marker_id("lineage", "s1"))) is True
    assert namespaces(ledger) == ["markers-only"]


def test_many_namespaces_come_in_pages(open_pg: Opener, monkeypatch: pytest.MonkeyPatch) -> None:
    for flavour in ("ledger", "aio"):  # several pages, a short last
        monkeypatch.setattr(f"ledger_postgres.{flavour}.PAGE_SIZE", 3)
    names = [f"ns-{i:02d}" for i in range(10)]
    for name in names:
        assert open_pg(namespace=name).spend("one") is True
    assert namespaces(open_pg(namespace="ns-00")) == names


def test_a_store_that_forgot_fails_the_listing(
    open_pg: Opener, admin: psycopg.Connection[Any], table: str
) -> None:
    ledger = open_pg(namespace="n1")
    assert ledger.spend("x") is True
    admin.execute(sql.SQL("TRUNCATE {}").format(sql.Identifier(table)))
    with pytest.raises(UnsafeStoreConfig, match="reopen"):
        namespaces(ledger)
