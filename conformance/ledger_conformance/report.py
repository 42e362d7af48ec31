"""The per-clause table: what each clause checks, and passed / failed / not exercised."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ledger_core.protocol import describe

CLAUSES: dict[str, str] = {
    "C1": "once: exactly one True per id (threads, tasks, processes, fork)",
    "C2": "permanent: spent ids survive reopen, new instances, time, restarts",
    "C3": "is_spent is exact and current, and never records",
    "C4": "fail closed: a fault raises; never a false True, never a false False",
    "C5": "ambiguity: a write whose reply was lost is resolved, not guessed",
    "C6": "store identity: one store_id per store, another for any other or after a forget",
    "C7": "isolation: stores never collide under any key encoding",
    "C8": "ids: 1-1024 UTF-8 bytes, compared exactly; invalid ids refused",
    "C9": "the sync and async variants agree on one store",
    "H1": "host: only a result that is True lets the call run",
    "H2": "host: is_spent tells a failed spend that never landed",
    "H3": "host: a close proves only with a store_id; markers are never ids",
    "H4": "host: a retried close keeps its verdict; late answers are told",
    "H5": "host: a decision is spent only in the store it was minted under",
    "L1": "listing (spent_ids): every spent id once, nothing else, under spends",
}

PASSED, FAILED, NOT_EXERCISED, NOT_APPLICABLE = (
    "passed",
    "failed",
    "not exercised",
    "not applicable",
)
_NAME = re.compile(r"test_([CHL]\d)_")


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


@dataclass(frozen=True)
class LedgerSummary:
    """What one ledger under test says about itself (``describe()``), shown above the table."""

    flavor: str
    backend: str
    store_id: str | None
    durability: str
    reason: str | None


def summarize_ledger(ledger: object, flavor: str) -> LedgerSummary:
    """The ledger's identity, durability claim and reason; a describe() that raises says so."""
    try:
        info = describe(ledger)
    except Exception as exc:
        return LedgerSummary(
            flavor, type(ledger).__name__, None, "", f"describe() raised {type(exc).__name__}"
        )
    return LedgerSummary(flavor, info.backend, info.store_id, info.durability, info.reason)


def render_ledger(summary: LedgerSummary) -> str:
    """One line: backend, store_id, the durability it claims, and the reason when present."""
    shown = summary.store_id if summary.store_id is not None else "None (never proves)"
    line = (
        f"ledger ({summary.flavor}): {summary.backend}, store_id {shown}, durability "
        f"{summary.durability or 'not stated (describe() gives none)'}"
    )
    return f"{line}; reason: {summary.reason}" if summary.reason else line


def render(
    rows: list[ClauseResult], *, width: int = 110, ledgers: Sequence[LedgerSummary] = ()
) -> str:
    """A plain-text table: clause, what it checks, result, and why (under the ledgers)."""
    described = [
        wrapped
        for summary in ledgers
        for wrapped in textwrap.wrap(render_ledger(summary), width, subsequent_indent="    ")
    ]
    what_w = max(len(text) for text in CLAUSES.values())
    status_w = max(len(s) for s in (PASSED, FAILED, NOT_EXERCISED, NOT_APPLICABLE))
    header = f"{'clause':<6}  {'what it checks':<{what_w}}  {'result':<{status_w}}"
    header = header.rstrip()
    lines = [*described, *([""] if described else []), header, "-" * len(header)]
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
