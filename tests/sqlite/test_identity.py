"""C6 per namespace: every operation proves its namespace's genesis in its own statement.

Before: the identity was one uuid in ``decision_ledger_meta`` for the whole file, the
records in ``decision_ledger``. ``DELETE FROM decision_ledger`` (or ``DROP TABLE
decision_ledger`` and any ordinary open), or deleting every row of one namespace, kept
the ``store_id``, and a spent id answered ``True`` again (and ``is_spent`` ``False``).
Now the genesis is a row beside the namespace's records: whatever empties them takes it
too, and every instance that still reports the old ``store_id`` raises, sync and async.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ledger_core import LedgerUnavailable, UnsafeStoreConfig
from ledger_core.cli import main as cli
from ledger_core.ids import marker_id
from ledger_sqlite import AsyncSQLiteLedger, SQLiteLedger

KEY = "attempt-key-0123456789"


class Ledger:
    """One instance, called as the sync ledger or through the async one (its own loop)."""

    def __init__(self, path: Path, namespace: str, mode: str) -> None:
        self.loop = asyncio.new_event_loop() if mode == "async" else None
        if self.loop is None:
            self.ledger: Any = SQLiteLedger(path, namespace=namespace)
        else:
            self.ledger = self.loop.run_until_complete(
                AsyncSQLiteLedger.open(path, namespace=namespace)
            )

    def __call__(self, name: str, *args: Any) -> Any:
        answer = getattr(self.ledger, name)(*args)
        listing = name in ("spent_ids", "namespaces")
        if self.loop is None:
            return list(answer) if listing else answer
        return self.loop.run_until_complete(_collect(answer) if listing else answer)

    @property
    def store_id(self) -> str | None:
        return self.ledger.store_id  # type: ignore[no-any-return]

    def close(self) -> None:
        if self.loop is None:
            self.ledger.close()
        else:
            self.loop.run_until_complete(self.ledger.aclose())
            self.loop.close()


async def _collect(items: Any) -> list[str]:
    return [item async for item in items]


def _sql(path: Path, *statements: str) -> None:
    other = sqlite3.connect(path, isolation_level=None)
    for statement in statements:
        other.execute(statement)
    other.close()


OPERATIONS: list[tuple[str, tuple[Any, ...]]] = [
    ("spend", ("spent",)),
    ("is_spent", ("spent",)),
    ("spend", ("fresh",)),
    ("spend_as", ("spent", KEY)),
    ("spend_many", (["spent", "fresh"],)),
    ("is_spent_many", (["spent"],)),
    ("spent_ids", ()),
    ("lineage", ()),
    ("namespaces", ()),
]


def _fails_closed(olds: list[Ledger]) -> None:
    """Each operation, on an instance of its own opened before the forget, raises by
    itself (an instance that failed closed already raises), and keeps raising."""
    for old, (name, args) in zip(olds, OPERATIONS, strict=True):
        with pytest.raises(UnsafeStoreConfig, match="forgot"):
            print(name, old(name, *args))  # shows what answered, should one answer
        with pytest.raises(UnsafeStoreConfig, match="forgot"):
            old("is_spent", "spent")


def _drop_and_open(path: Path) -> None:
    _sql(path, "DROP TABLE decision_ledger")
    SQLiteLedger(path).close()  # an ordinary open re-creates the table


FORGETS: dict[str, Callable[[Path], None]] = {
    "delete records": lambda path: _sql(path, "DELETE FROM decision_ledger"),
    "drop records, ordinary open": _drop_and_open,
    "delete every table's rows": lambda path: _sql(
        path, "DELETE FROM decision_ledger", "DELETE FROM decision_ledger_meta"
    ),
}


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("forget", list(FORGETS))
def test_emptying_the_records_table_fails_closed(tmp_path: Path, forget: str, mode: str) -> None:
    path = tmp_path / "l.db"
    olds = [Ledger(path, "default", mode) for _ in OPERATIONS]
    assert olds[0]("spend", "spent") is True
    assert olds[0]("spend_marker", marker_id("migrated-from", "sqlite:x")) is True
    before = olds[0].store_id
    FORGETS[forget](path)  # the meta table (the file's uuid) stays, except the last form
    _fails_closed(olds)
    new = Ledger(path, "default", mode)
    assert new.store_id != before  # a new store: asked again under the new store_id (H5)
    assert new("is_spent", "spent") is False
    assert new("spend", "spent") is True
    with pytest.raises(UnsafeStoreConfig):
        olds[0]("is_spent", "spent")  # it never adopts the new identity
    for ledger in (*olds, new):
        ledger.close()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_emptying_one_namespace_fails_its_ledgers_closed(tmp_path: Path, mode: str) -> None:
    path = tmp_path / "l.db"
    olds, neighbour = [Ledger(path, "a", mode) for _ in OPERATIONS], Ledger(path, "b", mode)
    for ledger in (olds[0], neighbour):
        assert ledger("spend", "spent") is True
    before = olds[0].store_id
    _sql(path, "DELETE FROM decision_ledger WHERE namespace = 'a'")
    _fails_closed(olds)
    assert neighbour("spend", "spent") is False  # another namespace kept its records
    assert neighbour("is_spent", "spent") is True
    assert neighbour("namespaces") == ["b"]
    new = Ledger(path, "a", mode)
    assert new.store_id != before
    assert new("is_spent", "spent") is False
    for ledger in (*olds, neighbour, new):
        ledger.close()


def test_a_forgotten_namespace_is_refused_without_create(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    SQLiteLedger(path, namespace="a").close()
    _sql(path, "DELETE FROM decision_ledger WHERE namespace = 'a'")
    with pytest.raises(LedgerUnavailable, match=r"'a'.*no identity.*decision-ledger setup"):
        SQLiteLedger(path, namespace="a", create=False)
    with pytest.raises(LedgerUnavailable, match="no identity"):
        SQLiteLedger(path, namespace="never-opened", create=False)


def test_the_meta_table_alone_is_not_the_identity(tmp_path: Path) -> None:
    """The records and their genesis stay: nothing was forgotten, the answers stand."""
    path = tmp_path / "l.db"
    ledger = SQLiteLedger(path)
    assert ledger.spend("spent") is True
    _sql(path, "DELETE FROM decision_ledger_meta")
    assert ledger.spend("spent") is False
    with SQLiteLedger(path) as again:  # re-marks the layout, keeps every genesis
        assert again.store_id == ledger.store_id
        assert again.is_spent("spent") is True
    ledger.close()


# -- files made by older versions -----------------------------------------------------

OLD_UUID = "6a1c1b1e-0000-4000-8000-000000000000"
OLD_SCHEMA = (
    "CREATE TABLE decision_ledger_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID",
    "CREATE TABLE decision_ledger (namespace TEXT NOT NULL, request_id BLOB NOT NULL, "
    "token BLOB NOT NULL, spent_at REAL NOT NULL, PRIMARY KEY (namespace, request_id)) "
    "WITHOUT ROWID",
    f"INSERT INTO decision_ledger_meta VALUES ('store_uuid', '{OLD_UUID}')",
    "INSERT INTO decision_ledger VALUES ('default', CAST('old' AS BLOB), x'00', 0)",
    "INSERT INTO decision_ledger VALUES ('other', CAST('old' AS BLOB), x'00', 0)",
)


def old_file(path: Path, *, holder: bool = False) -> None:
    """A ledger file as older versions made it: one uuid for the file, no genesis rows
    (and, before re-entry, no ``holder`` column)."""
    _sql(path, "PRAGMA journal_mode=WAL", *OLD_SCHEMA)
    if holder:
        _sql(path, "ALTER TABLE decision_ledger ADD COLUMN holder BLOB")


def _layout(path: Path) -> list[Any]:
    conn = sqlite3.connect(path)
    try:
        return [
            conn.execute("SELECT count(*) FROM decision_ledger_meta").fetchone()[0],
            conn.execute("SELECT count(*) FROM decision_ledger WHERE request_id = x''").fetchone()[
                0
            ],
            [c[1] for c in conn.execute("PRAGMA table_info(decision_ledger)")],
        ]
    finally:
        conn.close()


@pytest.mark.parametrize("holder", [False, True])
def test_an_older_file_is_refused_without_create_naming_the_fix(
    tmp_path: Path, holder: bool
) -> None:
    path = tmp_path / "old.db"
    old_file(path, holder=holder)
    before = _layout(path)
    with pytest.raises(LedgerUnavailable, match="older version") as raised:
        SQLiteLedger(path, create=False)
    assert f"decision-ledger setup sqlite:///{path}" in str(raised.value)
    assert "create=true" in str(raised.value)
    assert _layout(path) == before  # never altered by a reader


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("holder", [False, True])
def test_an_older_file_is_upgraded_keeping_every_store_id(
    tmp_path: Path, holder: bool, mode: str
) -> None:
    path = tmp_path / "old.db"
    old_file(path, holder=holder)
    ledger = Ledger(path, "default", mode)  # create=true: the upgrade, in one transaction
    assert ledger.store_id == f"sqlite:{OLD_UUID}:default"  # pending approvals stand
    assert ledger("spend", "old") is False
    assert ledger("spend_as", "fresh", KEY) is True
    assert ledger("spend", "spent") is True
    with SQLiteLedger(path, namespace="other", create=False) as other:  # upgraded too
        assert other.store_id == f"sqlite:{OLD_UUID}:other"
        assert other.is_spent("old") is True
    assert _layout(path)[:2] == [2, 2]  # the layout is marked; a genesis per namespace
    olds = [Ledger(path, "default", mode) for _ in OPERATIONS]
    assert olds[0].store_id == ledger.store_id
    _sql(path, "DELETE FROM decision_ledger WHERE namespace = 'default'")
    _fails_closed(olds)  # before: True again, under the same store_id
    again = Ledger(path, "default", mode)
    assert again.store_id != f"sqlite:{OLD_UUID}:default"  # never the file's uuid again
    assert again("is_spent", "old") is False
    for each in (ledger, *olds, again):
        each.close()


def test_openers_of_a_new_namespace_agree_on_one_genesis(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    old_file(path)
    ledgers = [SQLiteLedger(path, namespace=ns) for ns in ("default", "new", "new")]
    assert ledgers[0].store_id == f"sqlite:{OLD_UUID}:default"
    assert ledgers[1].store_id == ledgers[2].store_id != f"sqlite:{OLD_UUID}:new"
    for ledger in ledgers:
        ledger.close()


def test_an_emptied_namespace_never_gets_the_files_uuid_back(tmp_path: Path) -> None:
    """Even with the layout mark deleted too, an upgrade seeds only namespaces that hold
    records: an emptied one gets a new genesis, and its old instances stay failed."""
    path = tmp_path / "old.db"
    old_file(path)
    ledger = SQLiteLedger(path)
    assert ledger.store_id == f"sqlite:{OLD_UUID}:default"
    _sql(
        path,
        "DELETE FROM decision_ledger WHERE namespace = 'default'",
        "DELETE FROM decision_ledger_meta WHERE key = 'layout'",
    )
    with SQLiteLedger(path) as again:
        assert again.store_id != ledger.store_id
    with pytest.raises(UnsafeStoreConfig, match="forgot"):
        ledger.spend("old")
    ledger.close()


def test_the_cli_refuses_an_older_file_until_setup_upgrades_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "old.db"
    old_file(path)
    url = f"sqlite:///{path}"
    assert cli(["is-spent", url, "old"]) == 3  # create=false: refused, the file untouched
    assert f"decision-ledger setup {url}" in capsys.readouterr().err
    assert cli(["setup", url]) == 0
    capsys.readouterr()
    assert cli(["store-id", url]) == 0
    assert capsys.readouterr().out.strip() == f"sqlite:{OLD_UUID}:default"
    assert cli(["is-spent", url, "old"]) == 0
