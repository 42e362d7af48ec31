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

PASSED, FAILED, NOT_EXERCISED, NOT_APPLICABLE, PARTLY = (
    "passed",
    "failed",
    "not exercised",
    "not applicable",
    "partly exercised",
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
    detail: str = ""  # the skip reason or the failure's message, whole, on one line
    notes: tuple[str, ...] = ()  # what the report shows even on a pass
    partly: tuple[str, ...] = ()  # parts of the test left out, and why
    referred: tuple[tuple[str, str], ...] = ()  # (clause, violations) seen, not its own


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
        left_out = [f"{t.name}: {p}" for t in passed for p in t.partly]
        left_out += sorted({f"{t.name}: {t.detail}" for t in skipped})
        notes = list(dict.fromkeys(n for t in passed for n in t.notes))
        if failed:
            first = failed[0]
            more = ""
            if len(failed) > 1:
                more = f" (+{len(failed) - 1} more: {', '.join(t.name for t in failed[1:])})"
            rows.append(ClauseResult(clause, FAILED, f"{first.name}: {first.detail}{more}"))
        elif passed and left_out:
            parts = [f"{len(passed)} test(s) passed; left out: " + "; ".join(left_out), *notes]
            rows.append(ClauseResult(clause, PARTLY, "; ".join(parts)))
        elif passed:
            rows.append(ClauseResult(clause, PASSED, "; ".join(notes)))
        else:
            reasons = sorted({t.detail for t in skipped})
            status = skip_status(reasons[0]) if reasons else NOT_EXERCISED
            details = "; ".join(r.split(": ", 1)[-1] for r in reasons)
            rows.append(ClauseResult(clause, status, details))
    return _referred(rows, [(t, r) for ts in by_clause.values() for t in ts for r in t.referred])


def _referred(
    rows: list[ClauseResult], referred: list[tuple[CaseOutcome, tuple[str, str]]]
) -> list[ClauseResult]:
    """A violation another clause's test saw fails its own clause (once), if that clause's
    tests missed it: it is never lost, and never failed twice."""
    by_clause = {row.clause: row for row in rows}
    for seen_by, (clause, text) in referred:
        row = by_clause.get(clause)
        if row is not None and row.status == FAILED:
            continue
        by_clause[clause] = ClauseResult(clause, FAILED, f"seen by {seen_by.name}: {text}")
    order = list(CLAUSES) + sorted(set(by_clause) - set(CLAUSES))
    return [by_clause[c] for c in order if c in by_clause]


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
    status_w = max(len(s) for s in (PASSED, FAILED, NOT_EXERCISED, NOT_APPLICABLE, PARTLY))
    header = f"{'clause':<6}  {'what it checks':<{what_w}}  {'result':<{status_w}}"
    header = header.rstrip()
    lines = [*described, *([""] if described else []), header, "-" * len(header)]
    indent = " " * 8
    for row in rows:
        what = CLAUSES.get(row.clause, "")
        lines.append(f"{row.clause:<6}  {what:<{what_w}}  {row.status}")
        if row.detail:
            lines.extend(
                textwrap.wrap(row.detail, width, initial_indent=indent, subsequent_indent=indent)
            )
    failed = sum(r.status == FAILED for r in rows)
    part = sum(r.status == PARTLY for r in rows)
    passed = sum(r.status == PASSED for r in rows) + part
    lines.append("")
    summary = (
        f"{passed} clause(s) passed, {failed} failed, {len(rows) - passed - failed} not exercised"
        " or not applicable"
    )
    lines.append(summary + (f" ({part} of the passed only partly exercised)" if part else ""))
    return "\n".join(lines)
