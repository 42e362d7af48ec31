"""No warning from opening a SQLite ledger, sync or async."""

from __future__ import annotations

from pathlib import Path

from tests.quiet_open import NONE, warnings_on_open


def test_opening_warns_of_nothing(tmp_path: Path) -> None:
    assert warnings_on_open(f"sqlite:///{tmp_path}/quiet.db") == NONE
