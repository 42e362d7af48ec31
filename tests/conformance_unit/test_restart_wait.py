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


def _table(capsys: pytest.CaptureFixture[str], select: str) -> tuple[int, str]:
    code = run_check(url=None, factory=FACTORY, profile="quick", select=select)
    return code, capsys.readouterr().out


def test_a_restart_hook_that_returns_early_is_waited_for_and_said(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out = _table(capsys, "C2_server_restart")
    assert code == 0, out
    assert re.search(r"^C2 .* passed$", out, re.MULTILINE), out
    flat = " ".join(out.split())
    assert re.search(
        r"the restart hook returned \d+\.\d s before the store served again \(until then: "
        r"LedgerUnavailable: LOADING",
        flat,
    ), out


def test_a_store_that_never_serves_again_blames_the_hook(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LEDGER_ZOO_LOADING_CALLS", "1000000")
    monkeypatch.setattr(restart, "SERVE_BOUND", 1.0)  # the check's children are forked
    code, out = _table(capsys, "C2_server_restart")
    assert code == 1, out
    flat = " ".join(out.split())
    assert re.search(
        r"the restart hook returned before the store served again: for \d+ s after it "
        r"returned, no new instance could read",
        flat,
    ), out
    assert "LOADING" in flat
