"""The suite holds few instances open at once, whatever the number of stores a run
touched: a server with a connection limit (PostgreSQL's ``max_connections``) must not
fail the suite's own final re-read."""

from __future__ import annotations

from pathlib import Path

from tests.conformance_unit.runs import run_pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_final_reread_closes_each_store_after_reading_it() -> None:
    """M1's sequences spend on a pair of new stores each (more stores than the limit);
    C2's final re-read opens one instance per store: each must be closed once read."""
    done = run_pytest(
        "--pyargs",
        "ledger_conformance",
        "--ledger-factory",
        "tests.conformance_unit.bounded:factory",
        "-k",
        "M1_random_sequences or C2_every_acknowledged",
        "-q",
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "3 passed" in done.stdout, done.stdout[-3000:]
