"""Clauses declare themselves: an id, what they check, and what they need.

The report's rows and titles come from these declarations, and a test whose needs are
missing is skipped with the one standard reason before it runs. No pytest import until a
test is marked, so the plugin stays light.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pytest

_ID = re.compile(r"([A-Z]+)(\d+)")
_NAME = re.compile(r"test_([A-Z]+\d+)_")

CAPABILITY, HOOK, ROUTE = "capability", "hook", "route"


@dataclass(frozen=True)
class Need:
    """Something a test needs beyond ``spend``: an optional capability of the ledger
    (every one of ``methods`` callable on it), a hook fixture, or a routable factory."""

    name: str
    kind: str
    methods: tuple[str, ...] = ()
    fixture: str = ""
    why: str = ""

    def reason(self) -> str:
        """The skip reason when the need is missing (its status word first)."""
        if self.kind == CAPABILITY:
            return f"not applicable: the ledger has no {self.name}" + (
                f" ({self.why})" if self.why else ""
            )
        return f"not exercised: {self.why}"

    def present_on(self, ledger: object) -> bool:
        return all(callable(getattr(ledger, method, None)) for method in self.methods)


# The optional capabilities: detected on each ledger, never assumed.
MARKERS = Need(
    "markers",
    CAPABILITY,
    ("spend_marker", "is_marker_spent"),
    why="spend_marker/is_marker_spent: a host records no close",
)
SPEND_AS = Need("spend_as", CAPABILITY, ("spend_as",), why="re-entry, C10, is optional")
SPENT_IDS = Need("spent_ids", CAPABILITY, ("spent_ids",), why="listing is optional")
NAMESPACES = Need("namespaces", CAPABILITY, ("namespaces",), why="namespace listing is optional")
SPEND_MANY = Need("spend_many", CAPABILITY, ("spend_many",), why="batches are optional")
CAPABILITIES = (MARKERS, SPEND_AS, SPENT_IDS, NAMESPACES, SPEND_MANY)


def _hook(name: str, options: str) -> Need:
    why = f"no ledger_{name} hook was given ({options})"
    return Need(f"{name} hook", HOOK, fixture=f"ledger_{name}", why=why)


RESTART = _hook("restart", "--ledger-restart, --ledger-restart-cmd, or check --restart")
FORGET = _hook("forget", "--ledger-forget or --ledger-forget-cmd")
FAILOVER = _hook("failover", "--ledger-failover or --ledger-failover-cmd")
RESTORE = _hook("restore", "--ledger-restore, --ledger-restore-cmd, or check --restore")
ROUTABLE = Need(
    "a network address",
    ROUTE,
    why="the URL has no single network address to put the fault proxy in front of",
)


def capabilities_of(ledger: object) -> tuple[str, ...]:
    """The names of the optional capabilities ``ledger`` offers, in declaration order."""
    return tuple(need.name for need in CAPABILITIES if need.present_on(ledger))


def clause_of_name(name: str) -> str | None:
    """The clause a test's name gives (``test_C10_...`` -> ``C10``), for unmarked tests."""
    found = _NAME.search(name)
    return found.group(1) if found else None


def clause_key(clause_id: str) -> tuple[str, int, str]:
    """Contract order: by letters, then by number (C9 before C10), then by text."""
    found = _ID.fullmatch(clause_id)
    if found is None:
        return (clause_id, 0, clause_id)
    return (found.group(1), int(found.group(2)), clause_id)


@dataclass(frozen=True)
class Clause:
    """One contract clause: its id (letters and digits: ``C1``, ``C10``, ``H3``), what
    it checks (the report's title), and what every one of its tests needs."""

    id: str
    title: str
    needs: tuple[Need, ...] = ()

    def __call__(self, *needs: Need) -> pytest.MarkDecorator:
        """The mark of one test of this clause, with what that test needs as well."""
        import pytest

        return pytest.mark.clause(self, needs=(*self.needs, *needs))


_declared: dict[str, Clause] = {}
_lock = threading.Lock()


def declare(clause_id: str, title: str, *needs: Need) -> Clause:
    """Declare a clause (once per id; the same declaration again is the same clause)."""
    if _ID.fullmatch(clause_id) is None:
        raise ValueError(f"clause id {clause_id!r}: expected capital letters then digits")
    clause = Clause(clause_id, title, needs)
    with _lock:
        known = _declared.setdefault(clause_id, clause)
    if known != clause:
        raise ValueError(f"clause {clause_id} is declared twice, differently")
    return clause


def declared(clause_id: str) -> Clause | None:
    with _lock:
        return _declared.get(clause_id)


def clause_of_mark(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Clause, tuple[Need, ...]]:
    """The clause and needs of a ``clause`` mark: ``clause(Clause, needs=...)``, or a
    plain ``clause("C4")`` (a declared id, or an undeclared one with no title)."""
    first = args[0] if args else None
    needs = tuple(n for n in kwargs.get("needs", ()) if isinstance(n, Need))
    if isinstance(first, Clause):
        return first, needs
    clause_id = str(first)
    return declared(clause_id) or Clause(clause_id, ""), needs


__all__ = [
    "CAPABILITIES",
    "FAILOVER",
    "FORGET",
    "MARKERS",
    "NAMESPACES",
    "RESTART",
    "RESTORE",
    "ROUTABLE",
    "SPEND_AS",
    "SPEND_MANY",
    "SPENT_IDS",
    "Clause",
    "Need",
    "capabilities_of",
    "clause_key",
    "clause_of_mark",
    "clause_of_name",
    "declare",
    "declared",
]
