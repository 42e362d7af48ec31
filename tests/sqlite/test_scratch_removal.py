"""SQLite's ``remove_scratch`` hook: a check's namespaces go, in one transaction; the
file's identity and every other namespace stay; the file is never created."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger_core.errors import LedgerUnavailable
from tests.scratch_removal import exercise, new_prefix, refuses, remove


def test_removes_exactly_the_scratch_namespaces(tmp_path: Path) -> None:
    exercise(f"sqlite:///{tmp_path / 'l.db'}")


def test_refuses_any_other_prefix(tmp_path: Path) -> None:
    refuses(f"sqlite:///{tmp_path / 'l.db'}")


def test_never_creates_the_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.db"
    with pytest.raises(LedgerUnavailable, match="cannot open"):
        remove(f"sqlite:///{path}", new_prefix())
    assert not path.exists()
