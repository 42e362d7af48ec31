"""The report never misleads (issue 12): each violation under its own clause, once; a clause
partly exercised says so; reasons whole; check leaves nothing in the working directory."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from xml.etree import ElementTree

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
    assert "no ledger_restart hook (test_C2_volume)" in rows[0].detail
    assert "not exercised: no hook (test_C2_server_restart)" in rows[0].detail
    table = render(rows)
    assert "1 clause(s) passed, 0 failed, 0 not exercised" in table
    assert "(1 of the passed only partly exercised)" in table


def test_a_reason_left_out_is_said_once_with_the_tests_it_covers() -> None:
    """A parametrized test's six cases skipped for one reason read as one reason, its cases
    folded after the test's name; C4's row repeated the reason six times."""
    why = "not exercised: no fault proxy in the path"
    cases = [f"test_C4_fault[{f}-{fault}]" for f in ("sync", "async") for fault in "abc"]
    rows = summarize(
        [
            CaseOutcome("C4", "test_C4_bounded", "passed"),
            *(CaseOutcome("C4", name, "skipped", why) for name in cases),
            CaseOutcome("C4", "test_C4_other", "skipped", why),
        ]
    )
    detail = rows[0].detail
    assert detail.count("no fault proxy") == 1, detail
    assert (
        "(test_C4_fault[sync-a, sync-b, sync-c, async-a, async-b, async-c], test_C4_other)"
        in detail
    ), detail


def test_the_table_ends_with_the_profile_and_the_time() -> None:
    rows = summarize([CaseOutcome("C1", "test_C1_a", "passed")])
    assert render(rows, profile="thorough", elapsed=12.34).splitlines()[-1] == (
        "profile thorough, 12.3 s"
    )


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
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No ini file near the installed suite applies: a source checkout's pyproject.toml
    (its 300 s per-test timeout) failed a slow store's thorough C1 as a 'Timeout'."""
    seen = tmp_path / "seen.json"  # pytest runs in a forked child: it tells us in a file
    real = pytest.main

    class Spy:
        def pytest_configure(self, config: pytest.Config) -> None:
            loaded = config.pluginmanager.has_plugin("timeout")  # a check loads none
            timeout = str(config.getini("timeout")) if loaded else ""
            found = {"ini": str(config.inipath), "timeout": timeout}
            seen.write_text(json.dumps(found), encoding="utf-8")

    def main(args: list[str], plugins: list[object]) -> object:
        return real(args, plugins=[*plugins, Spy()])

    monkeypatch.setattr(pytest, "main", main)  # what the runner calls
    code = run_check(url="memory://config", factory=None, profile="quick", select="C8_invalid")
    assert code == 0, capsys.readouterr().out
    found = json.loads(seen.read_text(encoding="utf-8"))
    ini = Path(found["ini"])
    assert ini.name == "pytest.ini", ini
    assert ini.parent.name.startswith("decision-ledger-check-"), ini
    assert found["timeout"] in ("", "0", "0.0", "None"), found["timeout"]


def test_check_loads_only_its_own_pytest_plugins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An installed plugin (here pytest-timeout, a dev dependency) does not load into a
    check: one could reorder, rerun or time out clauses, and a heavy one (langsmith's)
    cost every check about 4 s before its first clause."""
    seen = tmp_path / "plugins.json"
    real = pytest.main

    class Spy:
        def pytest_configure(self, config: pytest.Config) -> None:
            names = ("timeout", "ledger_conformance.plugin", "_hypothesis_pytestplugin")
            found = {name: config.pluginmanager.has_plugin(name) for name in names}
            seen.write_text(json.dumps(found), encoding="utf-8")

    def main(args: list[str], plugins: list[object]) -> object:
        return real(args, plugins=[*plugins, Spy()])

    monkeypatch.setattr(pytest, "main", main)
    code = run_check(url="memory://plugins", factory=None, profile="quick", select="C8_invalid")
    assert code == 0, capsys.readouterr().out
    assert json.loads(seen.read_text(encoding="utf-8")) == {
        "timeout": False,
        "ledger_conformance.plugin": True,
        "_hypothesis_pytestplugin": True,
    }


def test_check_is_quiet_and_names_its_log(capsys: pytest.CaptureFixture[str]) -> None:
    """The table and the verdict only: pytest's dots and warnings go to the log the last
    line names."""
    code = run_check(url="memory://quiet", factory=None, profile="quick", select="C8_generated")
    out, err = capsys.readouterr()
    assert code == 0, out
    assert err == "", err
    first, second, third = [line for line in out.splitlines() if line][:3]
    assert first.startswith("pytest's own output goes to "), out  # where its log goes
    assert second.startswith("profile quick; axes seed "), out  # the header: the run
    assert third.startswith("ledger (sync): "), out  # nothing of pytest's before the table
    assert "Warning" not in out, out
    last = out.strip().splitlines()[-1]
    assert last.startswith("pytest output: "), out
    log = Path(last.removeprefix("pytest output: "))
    assert first == f"pytest's own output goes to {log} (--verbose shows it here)"
    assert "passed" in log.read_text(encoding="utf-8")
    log.unlink()


def test_check_writes_a_json_report_and_junit_xml(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report, junit = tmp_path / "report.json", tmp_path / "junit.xml"
    code = run_check(
        url="memory://report",
        factory=None,
        profile="quick",
        select="C7 or C3_reads_across",
        report=str(report),
        junit=str(junit),
    )
    assert code == 0, capsys.readouterr().out
    document = json.loads(report.read_text(encoding="utf-8"))
    assert document["profile"] == "quick"
    assert isinstance(document["elapsed_seconds"], float)
    assert document["crashes"] == []
    assert document["exit_code"] == 0
    assert set(document["versions"]) >= {"python", "decision-ledger", "pytest"}
    clauses = {c["clause"]: c for c in document["clauses"]}
    assert clauses["C7"]["verdict"] == "passed"
    assert clauses["C7"]["exercised"], clauses["C7"]
    assert clauses["C3"]["verdict"] == "not applicable"  # memory: store_id is None
    assert all("store_id is None" in p["reason"] for p in clauses["C3"]["left_out"])
    grouped = clauses["C3"]["left_out_grouped"]
    assert len({g["reason"] for g in grouped}) == len(grouped)  # each reason once
    assert sorted(t for g in grouped for t in g["tests"]) == sorted(
        p["test"] for p in clauses["C3"]["left_out"]
    )
    suite = ElementTree.parse(junit).getroot().find("testsuite")
    assert suite is not None
    assert suite.get("time") is not None
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert cases["C7"].find("failure") is None
    assert cases["C3"].find("skipped") is not None


def test_every_option_of_check_and_of_the_plugin_says_what_it_does() -> None:
    """``--quick``, ``--thorough`` and ``--debug`` showed no help at all."""
    import argparse

    from ledger_conformance import plugin
    from ledger_core.cli import _parser

    sub = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    check = sub.choices["check"]
    silent = [a.dest for a in check._actions if a.option_strings and not a.help]
    assert silent == [], silent

    seen: dict[str, str | None] = {}

    class Group:
        def addoption(self, *names: str, **options: Any) -> None:
            seen[names[0]] = options.get("help")

    class Parser:
        def getgroup(self, *args: object) -> Group:
            return Group()

    plugin.pytest_addoption(Parser())  # type: ignore[arg-type]
    assert seen
    assert all(seen.values()), seen
