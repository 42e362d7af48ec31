"""``decision-ledger doctor`` on a store not set up yet: what ``setup`` would create,
and the server's settings checked anyway; nothing is created.

Before: exit 3 with one error line, so a fresh server could not be vetted before
anything was written to it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger_core import MemoryLedger
from ledger_core.cli import main
from ledger_core.errors import missing_store
from ledger_core.opening import OpenRequest
from ledger_core.registry import _registered, register_backend

Capture = pytest.CaptureFixture[str]


def test_sqlite_says_what_setup_creates_and_checks_the_directory(
    tmp_path: Path, capsys: Capture
) -> None:
    url = f"sqlite:///{tmp_path}/fresh.db"
    assert main(["doctor", url]) == 1  # a failed check: an answer, not "unavailable"
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("FAIL  store ")
    assert f"'{tmp_path}/fresh.db' does not exist yet" in lines[0]
    assert "decision-ledger setup" in lines[1]
    assert f"PASS  configuration  directory {tmp_path} exists and is writable" in lines
    assert lines[-1] == "1 check(s) failed"
    assert not (tmp_path / "fresh.db").exists()  # the doctor never creates


def test_sqlite_on_tmpfs_in_a_missing_directory_fails_both(
    tmpfs_dir: Path, capsys: Capture
) -> None:
    assert main(["doctor", f"sqlite:///{tmpfs_dir}/no/fresh.db"]) == 1
    out = capsys.readouterr().out
    assert "does not exist or is not writable" in out
    assert "filesystem tmpfs: a ledger there would never prove" in out


class _NoPreflight:
    def open(self, request: OpenRequest) -> MemoryLedger:
        raise missing_store("acme table t")

    async def open_async(self, request: OpenRequest) -> Any:
        raise NotImplementedError


@pytest.fixture
def acme() -> Iterator[None]:
    register_backend("acme-missing", _NoPreflight())
    yield
    _registered.pop("acme-missing", None)


def test_a_backend_without_preflight_says_so(acme: None, capsys: Capture) -> None:
    assert main(["doctor", "acme-missing://x"]) == 1
    out = capsys.readouterr().out
    assert "FAIL  store          acme table t does not exist yet" in out
    assert "INFO  configuration  _NoPreflight checks its server only once the store exists" in out
