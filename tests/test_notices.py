"""Warnings a newcomer needs: an open that created a new, empty store (a mistyped path
reads as "not spent" for every id), and a store that can never prove, once per process
and store on the ``decision_ledger`` logger; ``setup`` prints the doctor's line."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from ledger_core import open_ledger
from ledger_core.cli import main


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "decision_ledger"]


def test_an_open_that_creates_a_store_says_so_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"sqlite:///{tmp_path}/mistyped.db"
    open_ledger(url).close()  # type: ignore[attr-defined]
    open_ledger(url).close()  # type: ignore[attr-defined]
    created = [m for m in _warnings(caplog) if "created an empty store" in m]
    # Information on a first run (it is normal), and the typo case still plain:
    assert created == [
        f"new ledger: created an empty store at sqlite:///{tmp_path}/mistyped.db, as "
        "expected on first use. If you meant an existing ledger, this URL does not name it "
        "(every id would read 'not spent'): check the URL; create=False refuses a missing "
        "store"
    ]


def test_a_store_that_never_proves_is_logged_once_per_process(
    caplog: pytest.LogCaptureFixture,
) -> None:
    url = f"memory://never-proves-{uuid.uuid4().hex}"
    open_ledger(url)
    open_ledger(url)
    said = [m for m in _warnings(caplog) if "never proves" in m]
    assert len(said) == 1
    assert "no store_id: this ledger never proves" in said[0]
    assert "fix: " in said[0]


def test_two_namespaces_of_a_store_that_never_proves_say_it_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Before: one identical line per namespace opened (the reason is the store's)."""
    url = f"memory://never-proves-{uuid.uuid4().hex}"
    open_ledger(url, namespace="a")
    open_ledger(url, namespace="b")
    assert len([m for m in _warnings(caplog) if "never proves" in m]) == 1


def test_setup_prints_why_a_store_never_proves_and_the_fix(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["setup", f"memory://setup-{uuid.uuid4().hex}"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("store_id=None")
    assert out[1].startswith("warning: no store_id: this ledger never proves (")
    assert "; fix: fix what the reason names" in out[1]
