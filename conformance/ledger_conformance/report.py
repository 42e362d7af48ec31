"""The per-clause table: what each clause checks, and passed / failed / not exercised."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass

CLAUSES: dict[str, str] = {
    "C1": "once: exactly one True per id (threads, tasks, processes)",
    "C2": "permanent: spent ids survive reopen, new instances, time, restarts",
    "C3": "is_spent is exact and current, and never records",
    "C4": "fail closed: a fault raises; never a false True, never a false False",
    "C5": "ambiguity: a write whose reply was lost is resolved, not guessed",
    "C6": "store identity: one store_id per store, another for any other",
    "C7": "isolation: stores never collide under any key encoding",
    "C8": "ids: 1-1024 UTF-8 bytes, compared exactly; invalid ids refused",
    "C9": "the sync and async variants agree on one store",
    "H1": "host: only a result that is True lets the call run",
    "H2": "host: is_spent tells a failed spend that never landed",
    "H3": "host: a close proves only with a store_id, and records it",
    "H4": "host: a retried close keeps its verdict; late answers are told",
    "H5": "host: a decision is spent only in the store it was minted under",
}

PASSED, FAILED, NOT_EXERCISED, NOT_APPLICABLE = (
    "passed",
    "failed",
    "not exercised",
    "not applicable",
)
_NAME = re.compile(r"test_([CH]\d)_")


def clause_of_name(name: str) -> str | None:
    found = _NAME.search(name)
    return found.group(1) if found else None


@dataclass(frozen=True)
class CaseOutcome:
    clause: str
    name: str
    outcome: str  # passed, failed or skipped
    detail: str = ""  # the skip reason or the first line of the failure


@dataclass(frozen=True)
class ClauseResult:
    clause: str
    status: str
    detail: str


def skip_status(reason: str) -> str:
    return NOT_APPLICABLE if reason.startswith(NOT_APPLICABLE) else NOT_EXERCISED


def summarize(outcomes: Iterable[CaseOutcome]) -> list[ClauseResult]:
    """One row per clause that had tests, in contract order."""
    by_clause: dict[str, list[CaseOutcome]] = {}
    for outcome in outcomes:
        by_clause.setdefault(outcome.clause, []).append(outcome)
    order = list(CLAUSES) + sorted(set(by_clause) - set(CLAUSES))
    rows: list[ClauseResult] = []
    for clause in order:
        tests = by_clause.get(clause)
        if not tests:
            continue
        failed = [t for t in tests if t.outcome == "failed"]
        passed = [t for t in tests if t.outcome == "passed"]
        skipped = [t for t in tests if t.outcome == "skipped"]
        if failed:
            first = failed[0]
            more = f" (+{len(failed) - 1} more)" if len(failed) > 1 else ""
            rows.append(ClauseResult(clause, FAILED, f"{first.name}: {first.detail}{more}"))
        elif passed:
            note = f"{len(passed)} test(s)"
            if skipped:
                reasons = sorted({t.detail for t in skipped})
                note += f"; {len(skipped)} skipped: " + "; ".join(reasons)
            rows.append(ClauseResult(clause, PASSED, note))
        else:
            reasons = sorted({t.detail for t in skipped})
            status = skip_status(reasons[0]) if reasons else NOT_EXERCISED
            details = "; ".join(r.split(": ", 1)[-1] for r in reasons)
            rows.append(ClauseResult(clause, status, details))
    return rows


def render(rows: list[ClauseResult], *, width: int = 110) -> str:
    """A plain-text table: clause, what it checks, result, and why."""
    what_w = max(len(text) for text in CLAUSES.values())
    status_w = max(len(s) for s in (PASSED, FAILED, NOT_EXERCISED, NOT_APPLICABLE))
    header = f"{'clause':<6}  {'what it checks':<{what_w}}  {'result':<{status_w}}"
    header = header.rstrip()
    lines = [header, "-" * len(header)]
    indent = " " * 8
    for row in rows:
        what = CLAUSES.get(row.clause, "")
        lines.append(f"{row.clause:<6}  {what:<{what_w}}  {row.status}")
        if row.detail and row.status != PASSED:
            lines.extend(
                textwrap.wrap(row.detail, width, initial_indent=indent, subsequent_indent=indent)
            )
    failed = sum(r.status == FAILED for r in rows)
    passed = sum(r.status == PASSED for r in rows)
    lines.append("")
    lines.append(
        f"{passed} clause(s) passed, {failed} failed, {len(rows) - passed - failed} not exercised"
        " or not applicable"
    )
    return "\n".join(lines)
