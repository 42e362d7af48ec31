"""One outcome per clause test, kept while pytest runs: what the per-clause table is built from.

Used by the plugin (the table at the end of a pytest run) and by ``decision-ledger
check``. A test belongs to the clause its ``clause`` mark names (a declared
:class:`~ledger_conformance.declare.Clause`, or an id), else to the clause in its name.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from .declare import Clause, clause_of_mark, clause_of_name

if TYPE_CHECKING:
    import pytest

    from .report import CaseOutcome

# user_properties a test leaves for the report: a note, a part left out, another clause's
# violations seen by this test (value: (clause, text)).
NOTE, PARTLY, REFER = "ledger_note", "ledger_partly", "ledger_refer"
MESSAGE_LIMIT = 2000


def suite_of(nodeid: str) -> str:
    """The test class (or module) a test belongs to: one table per suite."""
    return nodeid.rsplit("::", 1)[0]


class Collector:
    """Keeps one outcome per clause test (a teardown error wins over a pass)."""

    def __init__(self) -> None:
        self.clauses: dict[str, Clause] = {}
        self.outcomes: dict[str, CaseOutcome] = {}

    def add_item(self, item: pytest.Item) -> None:
        marker = item.get_closest_marker("clause")
        if marker is not None and marker.args:
            clause, _ = clause_of_mark(marker.args, dict(marker.kwargs))
            self.clauses[item.nodeid] = clause
            return
        name = clause_of_name(item.name)
        if name:
            self.clauses[item.nodeid] = clause_of_mark((name,), {})[0]

    def add_report(self, report: pytest.TestReport) -> None:
        clause = self.clauses.get(report.nodeid)
        if clause is None:
            return
        from .report import CaseOutcome

        name = report.nodeid.rsplit("::", 1)[-1]
        props = [p for p in report.user_properties if len(p) == 2]
        notes = tuple(str(v) for k, v in props if k == NOTE)
        left_out = tuple(str(v) for k, v in props if k == PARTLY)
        referred = tuple(
            (str(v[0]), str(v[1])) for k, v in props if k == REFER and isinstance(v, tuple)
        )
        if report.skipped:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else ""
            status, detail = "skipped", reason.removeprefix("Skipped: ")
        elif report.failed:
            status, detail = "failed", failure_message(report)
        elif report.when == "call":
            status, detail = "passed", ""
        else:  # a passing setup or teardown: only what the teardown added (referred)
            known = self.outcomes.get(report.nodeid)
            if known is not None:
                self.outcomes[report.nodeid] = dataclasses.replace(known, referred=referred)
            return
        outcome = CaseOutcome(
            clause.id, name, status, detail, notes, left_out, referred, clause.title
        )
        previous = self.outcomes.get(report.nodeid)
        if previous is None or previous.outcome != "failed":  # a teardown error wins
            self.outcomes[report.nodeid] = outcome

    def by_suite(self) -> dict[str, list[CaseOutcome]]:
        suites: dict[str, list[CaseOutcome]] = {}
        for nodeid, outcome in self.outcomes.items():
            suites.setdefault(suite_of(nodeid), []).append(outcome)
        return suites


def failure_message(report: pytest.TestReport) -> str:
    """The failure's own message, whole, its lines joined: never cut at a colon or a line
    end. pytest's rewritten ``assert ...`` explanation after it is left out."""
    crash = getattr(report.longrepr, "reprcrash", None)
    message = getattr(crash, "message", None) or str(report.longrepr)
    kept: list[str] = []
    for line in message.strip().splitlines():
        if kept and line.lstrip().startswith("assert "):
            break
        if line.strip():
            kept.append(line.strip())
    text = " ".join(kept)
    if len(text) > MESSAGE_LIMIT:
        text = text[:MESSAGE_LIMIT] + f" ... ({len(text) - MESSAGE_LIMIT} more characters)"
    return text or "failed"


__all__ = ["NOTE", "PARTLY", "REFER", "Collector", "failure_message", "suite_of"]
