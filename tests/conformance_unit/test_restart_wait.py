"""A restart hook that returns before the store serves again (a redis-server still
``LOADING``) is not the ledger's failure: the suite waits, bounded, and says so; a store
that never serves fails naming the hook (issue 39: it showed as C2 ledger failures with
``BusyLoadingError``). The store: ``tests/zoo/loading.py``."""

from __future__ import annotations

import re

import pytest

from ledger_conformance.clauses import restart
from ledger_conformance.runner import run_check

FACTORY = "tests.zoo.loading:loads_after_restart"


def _check(capsys: pytest.CaptureFixture[str], code: int, said: str) -> str:
    """Run C2's restart test; the exit code must be ``code`` and the table (its wrapped
    lines joined) must match ``said``."""
    done = run_check(url=None, factory=FACTORY, profile="quick", select="C2_server_restart")
    out = capsys.readouterr().out
    assert done == code, out
    assert re.search(said, " ".join(out.split())), out
    return out


def test_a_restart_hook_that_returns_early_is_waited_for_and_said(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = _check(
        capsys,
        0,
        r"the restart hook returned \d+\.\d s before the store served again \(until then: "
        r"LedgerUnavailable: LOADING",
    )
    assert re.search(r"^C2 .* passed$", out, re.MULTILINE), out


def test_a_store_that_never_serves_again_blames_the_hook(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LEDGER_ZOO_LOADING_CALLS", "1000000")
    monkeypatch.setattr(restart, "SERVE_BOUND", 1.0)  # the check's children are forked
    _check(
        capsys,
        1,
        r"the restart hook returned before the store served again: for \d+ s after it "
        r"returned, no new instance could read \(last: LedgerUnavailable: LOADING",
    )
