"""The report never misleads (issue 12): each violation under its own clause, once; a clause
partly exercised says so; reasons whole; check leaves nothing in the working directory."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ledger_conformance.collect import failure_message as _message
from ledger_conformance.harness import error_text
from ledger_conformance.report import CaseOutcome, render, summarize
from ledger_conformance.runner import run_check
from ledger_core.cli import main


def _status(rows: Any) -> dict[str, str]:
    return {row.clause: row.status for row in rows}


def test_another_clauses_violation_fails_that_clause_once() -> None:
    """A C2 test that saw a double spend passes C2 and fails C1 (its tests missed it)."""
    seen = (("C1", "2 spends returned True for one id"),)
    rows = summarize(
        [
            CaseOutcome("C1", "test_C1_a", "passed"),
            CaseOutcome("C2", "test_C2_b", "passed", referred=seen),
            CaseOutcome("C3", "test_C3_c", "passed", referred=seen),
        ]
    )
    assert _status(rows) == {"C1": "failed", "C2": "passed", "C3": "passed"}
    c1 = next(r for r in rows if r.clause == "C1")
    assert "seen by test_C2_b" in c1.detail
    assert "2 spends returned True" in c1.detail


def test_a_referred_violation_does_not_replace_the_clauses_own_failure() -> None:
    rows = summarize(
        [
            CaseOutcome("C1", "test_C1_a", "failed", "AssertionError: 14 callers got True"),
            CaseOutcome("C2", "test_C2_b", "passed", referred=(("C1", "double spend"),)),
        ]
    )
    assert _status(rows) == {"C1": "failed", "C2": "passed"}
    assert "14 callers" in rows[0].detail


def test_a_clause_partly_exercised_says_what_was_left_out() -> None:
    rows = summarize(
        [
            CaseOutcome("C2", "test_C2_reopen", "passed"),
            CaseOutcome("C2", "test_C2_volume", "passed", partly=("no ledger_restart hook",)),
            CaseOutcome("C2", "test_C2_server_restart", "skipped", "not exercised: no hook"),
        ]
    )
    assert _status(rows) == {"C2": "partly exercised"}
    assert "test_C2_volume: no ledger_restart hook" in rows[0].detail
    assert "test_C2_server_restart: not exercised: no hook" in rows[0].detail
    table = render(rows)
    assert "1 clause(s) passed, 0 failed, 0 not exercised" in table
    assert "(1 of the passed only partly exercised)" in table


def test_a_failure_reason_is_whole_not_cut_at_its_first_line() -> None:
    text = "AssertionError: 64 threads per id:\n  'x-0': 14 callers got True\nassert not [...]"
    report = SimpleNamespace(longrepr=SimpleNamespace(reprcrash=SimpleNamespace(message=text)))
    shown = _message(report)  # type: ignore[arg-type]
    assert shown == "AssertionError: 64 threads per id: 'x-0': 14 callers got True"
    rows = summarize([CaseOutcome("C1", "t", "failed", shown)] * 2)
    assert "14 callers got True (+1 more: t)" in rows[0].detail


def test_a_multi_line_driver_error_is_one_whole_line() -> None:
    exc = ConnectionError("connection failed: FATAL: no such database\nHINT: create it\n")
    assert error_text(exc) == (
        "ConnectionError: connection failed: FATAL: no such database | HINT: create it"
    )


def test_check_without_arguments_says_what_to_give(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check"]) == 2
    err = capsys.readouterr().err
    assert "give the ledger to check: a URL" in err
    assert "not both" not in err


def test_check_writes_nothing_into_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    code = run_check(url="memory://check", factory=None, profile="quick", select="C8_generated")
    assert code == 0, capsys.readouterr().out
    assert list(work.iterdir()) == []


def test_check_runs_under_a_configuration_of_its_own(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No ini file near the installed suite applies: a source checkout's pyproject.toml
    (its 300 s per-test timeout) failed a slow store's thorough C1 as a 'Timeout'."""
    seen: dict[str, Any] = {}
    real = pytest.main

    class Spy:
        def pytest_configure(self, config: pytest.Config) -> None:
            seen["ini"] = config.inipath
            seen["timeout"] = config.getini("timeout")

    def main(args: list[str], plugins: list[object]) -> object:
        return real(args, plugins=[*plugins, Spy()])

    monkeypatch.setattr(pytest, "main", main)  # what the runner calls
    code = run_check(url="memory://config", factory=None, profile="quick", select="C8_invalid")
    assert code == 0, capsys.readouterr().out
    ini = seen["ini"]
    assert ini is not None
    assert ini.name == "pytest.ini", ini
    assert ini.parent.name.startswith("decision-ledger-check-"), ini
    assert str(seen["timeout"]) in ("", "0", "0.0", "None"), seen["timeout"]
