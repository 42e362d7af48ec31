"""Clauses declare themselves and the report is built from the declarations (issue 9);
optional capabilities are detected; check says what it left in the store (issue 12)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from ledger_conformance.declare import (
    MARKERS,
    SPEND_AS,
    capabilities_of,
    clause_key,
    clause_of_mark,
    declare,
    declared,
)
from ledger_conformance.report import CaseOutcome, render, summarize
from ledger_conformance.runner import run_check
from ledger_conformance.scratch import is_scratch_prefix
from ledger_core import AsyncMemoryLedger, MemoryLedger, registry
from ledger_core.opening import OpenRequest
from ledger_sqlite import SQLiteLedger
from ledger_sqlite.backend import BACKEND as SQLITE

from .runs import run_pytest


def test_two_digit_clause_ids_sort_after_one_digit_ones() -> None:
    ids = ["C10", "H1", "C2", "L1", "C9", "C1"]
    assert sorted(ids, key=clause_key) == ["C1", "C2", "C9", "C10", "H1", "L1"]
    rows = summarize([CaseOutcome(c, f"test_{c}_x", "passed") for c in ids])
    assert [r.clause for r in rows] == ["C1", "C2", "C9", "C10", "H1", "L1"]


def test_the_table_takes_its_titles_from_the_declarations() -> None:
    clause = declare("Z12", "a clause a third party declared")
    assert declared("Z12") is clause
    assert declare("Z12", "a clause a third party declared") == clause  # idempotent
    with pytest.raises(ValueError, match="twice"):
        declare("Z12", "another title")
    with pytest.raises(ValueError, match="letters then digits"):
        declare("c1", "lower case")
    table = render(summarize([CaseOutcome("Z12", "test_Z12_a", "passed")]))
    assert re.search(r"^Z12\s+a clause a third party declared\s+passed$", table, re.MULTILINE)


def test_a_mark_carries_the_clause_and_what_its_test_needs() -> None:
    clause = declare("Z13", "needs spend_as", SPEND_AS)
    mark = clause(MARKERS).mark
    found, needs = clause_of_mark(mark.args, dict(mark.kwargs))
    assert found is clause
    assert needs == (SPEND_AS, MARKERS)
    assert clause_of_mark(("Z13",), {}) == (clause, ())  # a plain id mark


def test_capabilities_are_detected_per_ledger() -> None:
    assert capabilities_of(MemoryLedger()) == ("markers", "spend_as", "spent_ids", "namespaces")
    assert capabilities_of(AsyncMemoryLedger()) == ("markers", "spend_as", "namespaces")

    class Bare:
        def spend(self, request_id: str) -> bool:
            return True

    assert capabilities_of(Bare()) == ()
    assert (
        SPEND_AS.reason()
        == "not applicable: the ledger has no spend_as (re-entry, C10, is optional)"
    )


def test_only_a_checks_own_prefix_may_be_removed() -> None:
    assert is_scratch_prefix("ledger-conformance-a1b2c3-")
    for bad in ("", "ledger-conformance-", "ledger-conformance-x-", "prod-a1b2c3-", "ledger-"):
        assert not is_scratch_prefix(bad), bad


def test_check_removes_its_scratch_where_the_backend_can(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = run_check(url="memory://scratch-check", factory=None, profile="quick", select="C7")
    out = capsys.readouterr().out
    assert code == 0, out
    found = re.search(
        r"scratch: removed the (\d+) namespace\(s\) named (ledger-conformance-\w+-)\*", out
    )
    assert found, out
    assert int(found.group(1)) >= 2  # C7 writes in several stores
    listed = list(_ledger("scratch-check").namespaces())
    assert not [n for n in listed if n.startswith(found.group(2))], listed


def test_check_keeps_its_scratch_when_asked(capsys: pytest.CaptureFixture[str]) -> None:
    code = run_check(
        url="memory://scratch-kept", factory=None, profile="quick", select="C7", keep_scratch=True
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert re.search(r"this run left \d+ namespace\(s\) named ledger-conformance-\w+-\*: ", out)
    assert "kept, as asked (--keep-scratch)" in out


class _Hookless:
    """SQLite without the optional ``remove_scratch`` hook: a third party's backend."""

    def open(self, request: OpenRequest) -> Any:
        return SQLITE.open(request)

    async def open_async(self, request: OpenRequest) -> Any:
        return await SQLITE.open_async(request)


def test_check_says_what_it_left_where_the_backend_cannot_remove(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(registry._registered, "hookless-sqlite", _Hookless())
    code = run_check(
        url=f"hookless-sqlite:///{tmp_path / 'l.db'}", factory=None, profile="quick", select="C7"
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "scratch: this run left" in out, out
    assert "has no remove_scratch hook" in out, out
    assert "nothing else in the store was touched" in out


def test_check_removes_its_scratch_from_a_sqlite_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'l.db'}"
    code = run_check(url=url, factory=None, profile="quick", select="C7")
    out = capsys.readouterr().out
    assert code == 0, out
    *_, last, log = out.strip().splitlines()  # the scratch line, then the log's
    assert log.startswith("pytest output: "), out
    found = re.fullmatch(
        r"scratch: removed the (\d+) namespace\(s\) named (ledger-conformance-\w+-)\* this run "
        r"wrote; nothing else in the store was touched",
        last,
    )
    assert found, out
    assert int(found.group(1)) >= 2
    with SQLiteLedger(tmp_path / "l.db") as ledger:  # "default" gets its genesis: no scratch
        assert not [n for n in ledger.namespaces() if n.startswith(found.group(2))]


def test_an_absent_capability_is_not_applicable_with_its_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A ledger without spend_as: C10 is "not applicable: the ledger has no spend_as"."""
    bare = "tests.conformance_unit.test_declare:without_spend_as"
    code = run_check(url=None, factory=bare, profile="quick", select="C10")
    out = capsys.readouterr().out
    assert code == 0, out
    assert re.search(r"^C10 .* not applicable$", out, re.MULTILINE), out
    assert "the ledger has no spend_as" in out


class _NoReentry:
    """A memory ledger seen without spend_as (only spend, is_spent, describe)."""

    def __init__(self, inner: MemoryLedger) -> None:
        self.spend, self.is_spent, self.describe = inner.spend, inner.is_spent, inner.describe


def without_spend_as(ctx: object) -> _NoReentry:
    from ledger_core.memory import named_store

    return _NoReentry(MemoryLedger(named_store(f"no-reentry-{ctx}")))


def _ledger(name: str) -> MemoryLedger:
    from ledger_core.memory import named_store

    return MemoryLedger(named_store(name))


def test_the_pytest_form_prints_the_table_with_durability(tmp_path: Path) -> None:
    done = run_pytest(
        "--pyargs", "ledger_conformance", "--ledger-url", f"sqlite:///{tmp_path / 'd.db'}",
        "-k", "C7", "-q",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "decision-ledger conformance" in done.stdout
    assert re.search(r"ledger \(sync\): sqlite, store_id \S+,\s+durability \S+", done.stdout), (
        done.stdout
    )
    assert re.search(r"^C7 .* passed$", done.stdout, re.MULTILINE), done.stdout
