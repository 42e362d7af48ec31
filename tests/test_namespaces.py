"""Listing a store's namespaces, and migrating all of them in one run (issue 13)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from ledger_core import AsyncMemoryLedger, MemoryLedger, MemoryStore, register_backend
from ledger_core.cli import main
from ledger_core.ids import closed_proven_marker
from ledger_core.protocol import NamespaceListing
from ledger_sqlite import SQLiteLedger
from tests.cli_stops import PlainBackend, press_ctrl_c_after

TRICKY = ["default", "a:b", "1:a", "é", "x" * 256]


def test_the_memory_ledger_lists_every_namespace_once() -> None:
    store = MemoryStore()
    for name in TRICKY:
        ledger = MemoryLedger(store, namespace=name)
        ledger.spend("r1")
        ledger.spend("r2")
    MemoryLedger(store, namespace="markers-only").spend_marker(closed_proven_marker("r"))
    own = MemoryLedger(store, namespace="empty-but-mine")
    assert isinstance(own, NamespaceListing)
    listed = list(own.namespaces())
    assert sorted(listed) == sorted([*TRICKY, "markers-only", "empty-but-mine"])
    assert len(listed) == len(set(listed))


def test_the_async_memory_ledger_lists_them_too() -> None:
    store = MemoryStore()
    MemoryLedger(store, namespace="a:b").spend("r")

    async def listed() -> list[str]:
        return [name async for name in AsyncMemoryLedger(store, namespace="c").namespaces()]

    assert sorted(asyncio.run(listed())) == ["a:b", "c"]


def test_cli_lists_namespaces_and_says_when_a_backend_cannot(
    capsys: pytest.CaptureFixture[str],
) -> None:
    store_name = "cli-namespaces"
    for name in ("prod", "a:b"):
        assert main(["spend", f"memory://{store_name}", "r", "--namespace", name]) == 0
    capsys.readouterr()
    assert main(["namespaces", f"memory://{store_name}"]) == 0
    assert capsys.readouterr().out.split("\n") == ["a:b", "default", "prod", ""]

    register_backend("plainns", PlainBackend())  # type: ignore[arg-type]
    assert main(["namespaces", "plainns://x"]) == 3
    assert "cannot list its store's namespaces" in capsys.readouterr().err
    assert main(["migrate", "plainns://x", "memory://elsewhere", "--all-namespaces"]) == 3
    assert "NamespaceListing" in capsys.readouterr().err


def test_cli_migrates_every_namespace_with_its_own_lineage_and_resumes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from ledger_core import cli

    names = ["default", "prod", "a:b"]
    for name in names:
        SQLiteLedger(tmp_path / "old.db", namespace=name).spend_many(
            [f"{name}-{n:04d}" for n in range(1500)]
        )
    old, new = f"sqlite:///{tmp_path}/old.db", f"sqlite:///{tmp_path}/new.db"

    real = cli._Meter.__call__
    press_ctrl_c_after(monkeypatch, 3)  # 2 batches of the first namespace, 1 of the second
    assert main(["migrate", old, new, "--all-namespaces"]) == 130
    err = capsys.readouterr().err
    assert f"decision-ledger migrate {old} {new} --all-namespaces" in err.splitlines()
    assert "namespace a:b (1 of 3):" in err

    monkeypatch.setattr(cli._Meter, "__call__", real)
    assert main(["migrate", old, new, "--all-namespaces"]) == 0
    assert "migrated 3 namespaces" in capsys.readouterr().out
    for name in names:
        source = SQLiteLedger(tmp_path / "old.db", namespace=name)
        target = SQLiteLedger(tmp_path / "new.db", namespace=name)
        assert sorted(target.spent_ids()) == [f"{name}-{n:04d}" for n in range(1500)]
        assert target.lineage() == [source.store_id]  # each its own lineage

    assert main(["migrate", old, new, "--all-namespaces", "--namespace", "prod"]) == 2
