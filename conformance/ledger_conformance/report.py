"""The per-clause table: what each clause checks, and passed / failed / not exercised."""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ledger_core.protocol import describe

from .axes import replay_note
from .declare import capabilities_of, clause_key, declared

PASSED, FAILED, PARTLY = "passed", "failed", "partly exercised"
NOT_EXERCISED, NOT_APPLICABLE = "not exercised", "not applicable"


@dataclass(frozen=True)
class CaseOutcome:
    clause: str
    name: str
    outcome: str  # passed, failed or skipped
    detail: str = ""  # the skip reason or the failure's message, whole, on one line
    notes: tuple[str, ...] = ()  # what the report shows even on a pass
    partly: tuple[str, ...] = ()  # parts of the test left out, and why
    referred: tuple[tuple[str, str], ...] = ()  # (clause, violations) seen, not its own
    title: str = ""  # what the clause checks, from its declaration


@dataclass(frozen=True)
class ClauseResult:
    clause: str
    status: str
    detail: str
    title: str = ""


def _title(clause: str, outcomes: Iterable[CaseOutcome] = ()) -> str:
    """The declared title (a test's own declaration first, then the declared clauses)."""
    for outcome in outcomes:
        if outcome.title:
            return outcome.title
    found = declared(clause)
    return found.title if found else ""


def skip_status(reason: str) -> str:
    return NOT_APPLICABLE if reason.startswith(NOT_APPLICABLE) else NOT_EXERCISED


def _by_clause(outcomes: Iterable[CaseOutcome]) -> dict[str, list[CaseOutcome]]:
    by_clause: dict[str, list[CaseOutcome]] = {}
    for outcome in outcomes:
        by_clause.setdefault(outcome.clause, []).append(outcome)
    return by_clause


def summarize(outcomes: Iterable[CaseOutcome]) -> list[ClauseResult]:
    """One row per clause that had tests, in contract order (C9 before C10)."""
    by_clause = _by_clause(outcomes)
    rows: list[ClauseResult] = []
    for clause in sorted(by_clause, key=clause_key):
        tests = by_clause[clause]
        title = _title(clause, tests)
        failed = [t for t in tests if t.outcome == "failed"]
        passed = [t for t in tests if t.outcome == "passed"]
        skipped = [t for t in tests if t.outcome == "skipped"]
        left_out = grouped_left_out(
            [(t.name, p) for t in passed for p in t.partly] + [(t.name, t.detail) for t in skipped]
        )
        notes = list(dict.fromkeys(n for t in passed for n in t.notes))
        if failed:
            first = failed[0]
            more = ""
            if len(failed) > 1:
                more = f" (+{len(failed) - 1} more: {', '.join(t.name for t in failed[1:])})"
            detail = f"{first.name}: {first.detail}{more}"
            rows.append(ClauseResult(clause, FAILED, detail, title))
        elif passed and left_out:
            # What ran is said apart from what was left out: a note read as a part left out
            detail = f"{len(passed)} test(s) passed; left out: " + "; ".join(left_out)
            detail += ". Noted: " + "; ".join(notes) if notes else ""
            rows.append(ClauseResult(clause, PARTLY, detail, title))
        elif passed:
            rows.append(ClauseResult(clause, PASSED, "; ".join(notes), title))
        else:
            reasons = sorted({t.detail for t in skipped})
            status = skip_status(reasons[0]) if reasons else NOT_EXERCISED
            groups = _groups([(t.name, t.detail) for t in skipped])
            details = "; ".join(
                reason.split(": ", 1)[-1] + (f" ({_tests(names)})" if len(groups) > 1 else "")
                for reason, names in groups.items()
            )
            rows.append(ClauseResult(clause, status, details, title))
    return _referred(rows, [(t, r) for ts in by_clause.values() for t in ts for r in t.referred])


def _groups(parts: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """reason -> the tests it covers, each reason once, in the order first seen."""
    groups: dict[str, list[str]] = {}
    for name, reason in parts:
        names = groups.setdefault(reason, [])
        if name not in names:
            names.append(name)
    return groups


def _tests(names: Sequence[str]) -> str:
    """Test names, a parametrized test's ids folded: ``test_x[sync, async], test_y``."""
    folded: dict[str, list[str]] = {}
    for name in names:
        base, bracket, param = name.partition("[")
        ids = folded.setdefault(base, [])
        if bracket:
            ids.append(param.removesuffix("]"))
    return ", ".join(f"{b}[{', '.join(ids)}]" if ids else b for b, ids in folded.items())


def grouped_left_out(parts: Iterable[tuple[str, str]]) -> list[str]:
    """Each reason a part was left out, once, with the tests it covers: a reason shared
    by a parametrized test's every case is read once, not once per case."""
    return [f"{reason} ({_tests(names)})" for reason, names in _groups(parts).items()]


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
        title = row.title if row is not None else _title(clause)
        detail = f"seen by {seen_by.name}: {text}"
        by_clause[clause] = ClauseResult(clause, FAILED, detail, title)
    return [by_clause[c] for c in sorted(by_clause, key=clause_key)]


@dataclass(frozen=True)
class LedgerSummary:
    """What one ledger under test says about itself (``describe()``), shown above the table."""

    flavor: str
    backend: str
    store_id: str | None
    durability: str
    reason: str | None
    capabilities: tuple[str, ...] | None = None  # optional ones detected (None: not looked)


def summarize_ledger(ledger: object, flavor: str) -> LedgerSummary:
    """The ledger's identity, durability claim, reason and optional capabilities; a
    describe() that raises says so."""
    found = capabilities_of(ledger)
    try:
        info = describe(ledger)
    except Exception as exc:
        why = f"describe() raised {type(exc).__name__}"
        return LedgerSummary(flavor, type(ledger).__name__, None, "", why, found)
    return LedgerSummary(flavor, info.backend, info.store_id, info.durability, info.reason, found)


def render_ledger(summary: LedgerSummary) -> str:
    """One line: backend, store_id, the durability it claims, its optional capabilities,
    and the reason when present."""
    shown = summary.store_id if summary.store_id is not None else "None (never proves)"
    line = (
        f"ledger ({summary.flavor}): {summary.backend}, store_id {shown}, durability "
        f"{summary.durability or 'not stated (describe() gives none)'}"
    )
    if summary.capabilities is not None:
        line += f"; optional capabilities: {', '.join(summary.capabilities) or 'none'}"
    return f"{line}; reason: {summary.reason}" if summary.reason else line


def render(
    rows: list[ClauseResult],
    *,
    width: int = 110,
    ledgers: Sequence[LedgerSummary] = (),
    profile: str | None = None,
    elapsed: float | None = None,
    seed: int | None = None,
) -> str:
    """A plain-text table: clause, what it checks, result, and why (under the ledgers);
    above them the profile and the seed with how to replay it (a failure on generated
    inputs reproduces from the header alone), under the verdict line the profile and the
    run's time, when given."""
    run = [f"profile {profile}"] if profile else []
    run += [replay_note(seed)] if seed is not None else []
    above = [*(["; ".join(run)] if run else []), *map(render_ledger, ledgers)]
    described = [
        wrapped
        for line in above
        for wrapped in textwrap.wrap(line, width, subsequent_indent="    ")
    ]
    what_w = max([len("what it checks"), *(len(row.title) for row in rows)])
    status_w = max(len(s) for s in (PASSED, FAILED, NOT_EXERCISED, NOT_APPLICABLE, PARTLY))
    header = f"{'clause':<6}  {'what it checks':<{what_w}}  {'result':<{status_w}}"
    header = header.rstrip()
    lines = [*described, *([""] if described else []), header, "-" * len(header)]
    indent = " " * 8
    for row in rows:
        lines.append(f"{row.clause:<6}  {row.title:<{what_w}}  {row.status}")
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
    ran = [f"profile {profile}"] if profile else []
    ran += [f"{elapsed:.1f} s"] if elapsed is not None else []
    if ran:
        lines.append(", ".join(ran))
    return "\n".join(lines)


def _versions() -> dict[str, str]:
    import platform
    from importlib import metadata

    found = {"python": platform.python_version()}
    for name in ("decision-ledger", "pytest", "hypothesis"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def report_document(
    rows: Sequence[ClauseResult],
    outcomes: Iterable[CaseOutcome],
    ledgers: Sequence[LedgerSummary],
    *,
    profile: str,
    target: str,
    exit_code: int,
    elapsed: float | None = None,
    crashes: Sequence[str] = (),
    seed: int | None = None,
) -> dict[str, object]:
    """The machine-readable report (``check --report FILE``): what the table says, with
    each clause's tests (exercised), the parts left out and every reason, the run's time,
    and the crashes outside any clause test."""
    by_clause = _by_clause(outcomes)
    clauses = []
    for row in rows:
        tests = by_clause.get(row.clause, [])
        clauses.append(
            {
                "clause": row.clause,
                "title": row.title,
                "verdict": row.status,
                "reason": row.detail,
                "exercised": [t.name for t in tests if t.outcome == "passed"],
                "failed": [
                    {"test": t.name, "reason": t.detail} for t in tests if t.outcome == "failed"
                ],
                "left_out": [
                    *({"test": t.name, "reason": p} for t in tests for p in t.partly),
                    *(
                        {"test": t.name, "reason": t.detail}
                        for t in tests
                        if t.outcome == "skipped"
                    ),
                ],
                "left_out_grouped": [
                    {"reason": reason, "tests": names}
                    for reason, names in _groups(
                        [(t.name, p) for t in tests for p in t.partly]
                        + [(t.name, t.detail) for t in tests if t.outcome == "skipped"]
                    ).items()
                ],
                "notes": list(dict.fromkeys(n for t in tests for n in t.notes)),
            }
        )
    counts = {status: sum(r.status == status for r in rows) for status in _STATUSES}
    return {
        "format": "decision-ledger-check/1",
        "target": target,
        "profile": profile,
        "elapsed_seconds": None if elapsed is None else round(elapsed, 1),
        "seed": seed,  # LEDGER_CONFORMANCE_SEED replays the run's draws
        "versions": _versions(),
        "exit_code": exit_code,
        "verdict": "failed" if exit_code else "passed",
        "counts": counts,
        "ledgers": [asdict(s) for s in ledgers],  # JSON: a tuple is a list
        "clauses": clauses,
        "crashes": list(crashes),
    }


_STATUSES = (PASSED, PARTLY, FAILED, NOT_EXERCISED, NOT_APPLICABLE)


def junit_xml(document: dict[str, Any]) -> str:
    """JUnit XML of a report document: one test case per clause (a failed clause is a
    failure, one not exercised or not applicable is skipped), its tests in system-out."""
    from xml.etree import ElementTree as ET

    clauses: list[dict[str, Any]] = document["clauses"]
    crashes: list[str] = document.get("crashes", [])
    elapsed = document.get("elapsed_seconds")
    suite = ET.Element(
        "testsuite",
        name=f"decision-ledger check ({document['profile']})",
        tests=str(len(clauses) + len(crashes)),
        failures=str(sum(c["verdict"] == FAILED for c in clauses)),
        skipped=str(sum(c["verdict"] in (NOT_EXERCISED, NOT_APPLICABLE) for c in clauses)),
        errors=str(len(crashes)),
    )
    if elapsed is not None:
        suite.set("time", f"{elapsed:.1f}")
    properties = ET.SubElement(suite, "properties")
    for key in ("target", "profile", "elapsed_seconds", "seed"):
        ET.SubElement(properties, "property", name=key, value=str(document.get(key)))
    for name, version in document["versions"].items():
        ET.SubElement(properties, "property", name=f"version.{name}", value=version)
    for clause in clauses:
        case = ET.SubElement(
            suite, "testcase", classname="decision-ledger.conformance", name=clause["clause"]
        )
        reason = clause["reason"] or ""
        if clause["verdict"] == FAILED:
            ET.SubElement(case, "failure", message=reason[:500], type="ClauseFailed").text = reason
        elif clause["verdict"] in (NOT_EXERCISED, NOT_APPLICABLE):
            ET.SubElement(case, "skipped", message=f"{clause['verdict']}: {reason}"[:500])
        lines = [f"{clause['clause']}: {clause['title']}: {clause['verdict']}"]
        lines += [f"exercised: {name}" for name in clause["exercised"]]
        lines += [
            f"left out: {group['reason']} ({_tests(group['tests'])})"
            for group in clause["left_out_grouped"]
        ]
        ET.SubElement(case, "system-out").text = "\n".join(lines)
    for number, crash in enumerate(crashes, 1):  # outside any clause test: an error
        case = ET.SubElement(
            suite, "testcase", classname="decision-ledger.conformance", name=f"crash {number}"
        )
        ET.SubElement(case, "error", message=crash[:500], type="InterpreterCrashed").text = crash
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
