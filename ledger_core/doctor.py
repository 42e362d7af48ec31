"""``decision-ledger doctor URL``: every safety check, pass or fail, and the fix for each.

Built from ``describe()`` (identity, durability), the migration markers, a backend's own
``doctor_checks()`` (versions, configuration), and a timed probe: a random id and marker
must read as not spent. Nothing is ever written.
"""

from __future__ import annotations

import re
import statistics
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from .errors import LedgerError
from .ids import marker_id
from .protocol import Durability, LedgerInfo, describe
from .runs import has_markers, run_state

PASS, FAIL, INFO = "pass", "fail", "info"
PROBES = 3
MAX_ROUND_TRIP = 1.0  # seconds, per read: above it a spend waits that long on every call


@dataclass(frozen=True)
class Check:
    """One line of the doctor's report. ``status``: ``pass``, ``fail`` or ``info``
    (nothing to judge: what the backend does not report). ``fix`` for a failure."""

    name: str
    status: str
    detail: str
    fix: str = ""
    raised: bool = False  # the store raised a LedgerError: nothing could be checked


@dataclass(frozen=True)
class Fact:
    """What a backend read about its store, as the doctor's line about it (``name``).
    ``safe``: ``True`` passes, ``False`` fails with ``fix``, ``None`` is an info line (not
    reported, or nothing to judge). :func:`report` renders a backend's facts."""

    seen: str
    safe: bool | None = True
    fix: str = ""
    name: str = "configuration"

    @classmethod
    def judged(
        cls, safe: bool, seen: str, unsafe: str, fix: str, name: str = "configuration"
    ) -> Fact:
        """``seen`` when it is safe, else ``unsafe`` (what it risks) with ``fix``."""
        return cls(seen, name=name) if safe else cls(unsafe, False, fix, name)

    @classmethod
    def unknown(cls, seen: str, fix: str, asserted: str = "", name: str = "configuration") -> Fact:
        """A setting the store would not report: a failure with ``fix``, or an info line
        ending in ``asserted`` (who vouches for it, e.g. ``asserted by trust_config``)."""
        return (
            cls(f"{seen}; {asserted}", None, name=name) if asserted else cls(seen, False, fix, name)
        )

    def check(self) -> Check:
        status = INFO if self.safe is None else PASS if self.safe else FAIL
        return Check(self.name, status, self.seen, self.fix if self.safe is False else "")


def dotted(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))


def parse_version(text: str) -> tuple[int, ...]:
    """A server's or driver's version text as numbers: ``"7.2.4-rc1"`` -> ``(7, 2, 4)``
    (each dotted piece's leading digits, 0 where it has none)."""
    pieces = (re.match(r"\d+", piece) for piece in text.split("."))
    return tuple(int(digits.group()) if digits else 0 for digits in pieces)


def version_fact(
    server: str,
    version: tuple[int, ...] | None,
    minimum: tuple[int, ...],
    needs: str,
    driver: str,
    *,
    shown: str | None = None,
    unknown: str = "the server reports no version",
) -> Fact:
    """The ``versions`` line of a backend's doctor: the server's version (as seen at open)
    against the lowest its commands need (``needs``: which feature), and the driver's."""
    said = shown or (dotted(version) if version is not None else "")
    if version is None:
        return Fact(f"{server}: {unknown}; {driver}", None, name="versions")
    return Fact.judged(
        version >= minimum,
        f"{server} {said} (>= {dotted(minimum)}: {needs}); {driver}",
        f"{server} {said} is older than {dotted(minimum)}, which the ledger needs "
        f"({needs}); {driver}",
        f"upgrade the server to {dotted(minimum)} or later",
        "versions",
    )


def report(info: LedgerInfo, version: Fact, facts: Iterable[Fact]) -> list[Check]:
    """A backend's ``doctor_checks()``: its ``versions`` line (:func:`version_fact`), then
    one line per fact it read at open, consistent with its decision: a ledger that refused
    to prove shows at least one failure (its reason, if no fact carries it)."""
    checks = [fact.check() for fact in facts]
    if info.store_id is None and not any(c.status == FAIL for c in checks):
        reason = info.reason or "this ledger never proves (no reason given)"
        checks.append(Fact(reason, False, "see identity").check())
    return [version.check(), *checks]


def topics(
    facts: Iterable[tuple[str, str]], refusals: Iterable[tuple[str, str]], page: str
) -> list[Fact]:
    """One fact per ``(topic, what it is)``: unsafe for each of the backend's own refusals
    about that topic (the fix points at ``page``), else safe; a refusal about a topic with
    no fact is a fact of its own."""
    refused: dict[str, list[str]] = {}
    for topic, reason in refusals:
        refused.setdefault(topic, []).append(reason)
    lines: list[Fact] = []
    for topic, detail in [*facts, *((t, "") for t in refused)]:
        reasons = refused.pop(topic, [])
        lines.extend(Fact(r, False, f"see {page} ({topic})") for r in reasons)
        if detail and not reasons:
            lines.append(Fact(detail))
    return lines


def identity_check(info: LedgerInfo) -> Check:
    if info.store_id is not None:
        where = f" ({info.identity})" if info.identity else ""
        return Check("identity", PASS, f"store_id {info.store_id}{where}")
    return Check(
        "identity",
        FAIL,
        f"no store_id: this ledger never proves ({info.reason or 'no reason given'})",
        "fix what the reason names (see the backend's page in docs/); until then hosts "
        "record every closed pause as possibly run",
    )


def _durability(info: LedgerInfo) -> Check:
    level = info.durability
    if level == Durability.MACHINE or (not level and info.store_id is not None):
        said = level or "not stated; a store_id claims machine-crash"
        return Check("durability", PASS, f"{said}: an acknowledged spend survives a power loss")
    if level == Durability.PROCESS and info.store_id is not None:
        return Check(
            "durability",
            PASS,
            "process-crash, accepted with durability=process: a spend survives a crash of "
            "the server process, and may be lost with the machine",
        )
    if level == Durability.PROCESS:
        return Check(
            "durability",
            FAIL,
            "process-crash only: an acknowledged spend may be lost with the machine",
            "put the store on a disk (not tmpfs/ramfs) or configure it to sync each write; "
            "or accept the risk explicitly with durability=process",
        )
    return Check(
        "durability",
        FAIL,
        f"{level or 'none stated'}: an acknowledged spend may be lost in a crash",
        "configure the store to persist each write before it replies (see docs/)",
    )


def _migration(ledger: object) -> Check:
    if not has_markers(ledger):
        return Check("migration", INFO, "no marker space: migrations cannot be tracked here")
    state = run_state(ledger)
    if state.unfinished:
        return Check(
            "migration",
            FAIL,
            str(state.describe()),
            "run the same `decision-ledger migrate OLD NEW` again to finish it; no host "
            "may use this store before it finishes",
        )
    if state.run:
        return Check("migration", PASS, f"last migration into it (run {state.run}) verified")
    return Check("migration", PASS, "never migrated into")


def _backend_checks(ledger: object, info: LedgerInfo) -> list[Check]:
    """The backend's own itemized checks (versions, configuration), when it has them."""
    own = getattr(ledger, "doctor_checks", None)
    if callable(own):
        try:
            checks = list(own())
        except LedgerError as exc:  # a re-read failed: nothing of it can be judged
            return [_unanswered("configuration", exc)]
        if all(isinstance(c, Check) for c in checks):
            return checks
    opened = Fact.judged(
        info.store_id is not None,
        "checked when it opened: nothing unsafe found",
        f"checked when it opened: {info.reason}",
        "see identity",
    )
    name = type(ledger).__name__
    return [
        opened.check(),
        Check("versions", INFO, f"{name} does not itemize its server's version checks"),
    ]


def _restore(ledger: object) -> Check:
    """The procedure after a restore from a backup, which no store can always detect (C6)."""
    if callable(getattr(ledger, "reidentify", None)):
        detail = (
            "after restoring this store from a backup, run `decision-ledger reidentify URL` "
            "(--all-namespaces for a whole store) before letting hosts in"
        )
    else:
        detail = (
            f"{type(ledger).__name__} has no reidentify(): after restoring this store from "
            "a backup, migrate it into a new store before letting hosts in"
        )
    return Check("restore", INFO, detail)


def _round_trip(ledger: object, limit: float) -> Check:
    """Read a random id and a random marker (never spent): both must read ``False``."""
    probe_id = f"decision-ledger-doctor-probe-{uuid.uuid4()}"
    probe_marker = marker_id("doctor-probe", str(uuid.uuid4()))
    is_spent = getattr(ledger, "is_spent", None)
    if not callable(is_spent):
        return Check(
            "round trip",
            FAIL,
            f"{type(ledger).__name__} has no is_spent: a failed spend always counts as spent",
            "use a ledger with is_spent (every backend shipped here has one)",
        )
    read_marker = getattr(ledger, "is_marker_spent", None) if has_markers(ledger) else None
    took: list[float] = []
    for _ in range(PROBES):
        start = time.perf_counter()
        answers = [is_spent(probe_id)]
        if read_marker is not None:
            answers.append(read_marker(probe_marker))
        took.append((time.perf_counter() - start) / len(answers))
        if any(answer is not False for answer in answers):
            return Check(
                "round trip",
                FAIL,
                f"a probe that was never spent read as {answers!r}: the store answers wrongly",
                "do not use this store; check that the URL names the store you think",
            )
    median = statistics.median(took)
    detail = f"{median * 1000:.2f} ms per read (median of {PROBES}; limit {limit * 1000:.0f} ms)"
    if median > limit:
        return Check(
            "round trip",
            FAIL,
            detail,
            "every spend waits at least this long: move the host nearer the store, or find "
            "what slows the store (disk, load); --max-rtt raises the limit",
        )
    return Check("round trip", PASS, detail)


def diagnose(ledger: object, *, max_round_trip: float = MAX_ROUND_TRIP) -> list[Check]:
    """Every check on an open ledger, in order. Reads only."""
    info = describe(ledger)
    checks = [identity_check(info), _durability(info), *_backend_checks(ledger, info)]
    checks.append(_restore(ledger))
    for name, check in (
        ("migration", _migration),
        ("round trip", lambda led: _round_trip(led, max_round_trip)),
    ):
        try:
            checks.append(check(ledger))
        except LedgerError as exc:
            checks.append(_unanswered(name, exc))
    return checks


def _unanswered(name: str, exc: LedgerError) -> Check:
    fix = "the store could not answer: make it reachable and run the doctor again"
    return Check(name, FAIL, f"{type(exc).__name__}: {exc}", fix, raised=True)


def render(checks: Iterable[Check]) -> list[str]:
    lines = []
    for check in checks:
        lines.append(f"{check.status.upper():<5} {check.name:<14} {check.detail}")
        if check.status == FAIL and check.fix:
            lines.append(f"{'':<5} {'':<14} fix: {check.fix}")
    return lines


__all__ = [
    "FAIL",
    "INFO",
    "PASS",
    "Check",
    "Fact",
    "diagnose",
    "render",
    "report",
    "topics",
    "version_fact",
]
