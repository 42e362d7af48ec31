"""A store that crashes the interpreter, wherever it crashes, gets a report and exit 1:
``decision-ledger check`` opened and described the ledgers in its own process, so a
store that aborted there (an LMDB store with its lock off) killed the check with exit
134 and no table (issue 39). The crashing ledgers are in ``tests/zoo/crashing.py``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ledger_conformance import runner
from ledger_conformance.runner import run_check

ZOO = "tests.zoo.crashing"


def _check(
    name: str,
    select: str,
    capsys: pytest.CaptureFixture[str],
    report: str | None = None,
    junit: str | None = None,
) -> tuple[int, str]:
    code = run_check(
        url=None,
        factory=f"{ZOO}:{name}",
        profile="quick",
        select=select,
        report=report,
        junit=junit,
    )
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@pytest.mark.parametrize(
    ("name", "said"),
    [
        (
            "crashes_opening",
            "the interpreter crashed opening the sync ledger (the factory call), before any "
            "clause ran: killed by signal 6 (SIGABRT)",
        ),
        (
            "crashes_describing",
            "the interpreter crashed in describe() of the sync ledger, before any clause ran: "
            "killed by signal 11 (SIGSEGV)",
        ),
    ],
)
def test_a_crash_opening_or_describing_the_ledger_is_named(
    name: str, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report, junit = tmp_path / "report.json", tmp_path / "junit.xml"
    code, out = _check(name, "C7", capsys, report=str(report), junit=str(junit))
    assert code == 1, out
    assert said in out, out
    document = json.loads(report.read_text(encoding="utf-8"))
    assert document["exit_code"] == 1
    assert said in document["crashes"][0]
    assert 'errors="1"' in junit.read_text(encoding="utf-8")


def test_a_crash_in_a_session_fixture_is_named_and_the_rest_not_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Not blamed on the first clause test that set the fixture up, and not retried once
    per test (each would crash again): the clauses left say they did not run."""
    code, out = _check("crashes_in_a_session_fixture", "C7 or C9", capsys)
    assert code == 1, out
    assert (
        "the interpreter crashed setting up the session fixture ledger_option_factory (for test_C7_"
    ) in out, out
    for clause in ("C7", "C9"):
        assert re.search(rf"^{clause} .* not exercised$", out, re.MULTILINE), out
    assert "not run: setting up the session fixture ledger_option_factory crashed" in out


def test_a_crash_in_a_clause_test_fails_that_clause(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _check("crashes_in_a_clause", "C7 or C8_edge or C9", capsys)
    assert code == 1, out
    assert re.search(r"^C8 .* failed$", out, re.MULTILINE), out
    assert "the interpreter crashed in this test: killed by signal 6 (SIGABRT)" in out
    assert re.search(r"^C7 .* passed$", out, re.MULTILINE), out
    assert re.search(r"^C9 .* passed$", out, re.MULTILINE), out  # ran after the crash


def test_an_open_that_hangs_is_killed_and_said(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The preflight's own 30 s bound is on its event loop, which a sync factory that
    hangs blocks: the child that opens the ledgers is killed instead."""
    monkeypatch.setattr(runner, "CHILD_BOUND", 1.0)
    code, out = _check("hangs_opening", "C7", capsys)
    assert code == 3, out
    assert (
        "cannot reach the store of tests.zoo.crashing:hangs_opening: no answer within 1 s "
        "(killed); the last step: opening the sync ledger (the factory call)"
    ) in out, out
