"""C8 look-alike families through every operation the ledger offers.

Each family (``a b`` / ``a%20b`` / ``a+b``, ``A`` / ``%41``, ``%`` / ``%25``, case,
width, normalization, whitespace, separators, quotes, URL punctuation) goes through
spend, ``spend_as``, ``spend_many`` / ``is_spent_many`` and markers, sync and async: one
member is recorded, its siblings must read unspent and then spend as new. A path that
decodes, folds or trims (often only one of them: the batch, the re-entry, the marker
path) merges a family.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ledger_core.ids import closed_proven_marker

from ..context import Flavor
from ..declare import MARKERS, SPEND_AS
from ..harness import Handle, Ledgers
from .c8_ids import C8, shown
from .c10_reentry import new_keys
from .drawn import replayable

FLAVORS: tuple[Flavor, ...] = ("sync", "async")
Write = Callable[[list[str]], list[object]]
Read = Callable[[list[str]], list[object]]


def _operations(handle: Handle) -> dict[str, tuple[Write, Read, Write]]:
    """op -> (record ids, read ids, record again expecting False) for what ``handle``
    offers; batch ops take the ids at once. Unrecorded: ``spend_as`` and markers are no
    ops of the history, and every answer is checked here."""
    single = handle.has_is_spent

    def reads(ids: list[str]) -> list[object]:
        return [handle.call("is_spent", rid) if single else None for rid in ids]

    def spends(ids: list[str]) -> list[object]:
        return [handle.call("spend", rid) for rid in ids]

    ops: dict[str, tuple[Write, Read, Write]] = {"spend": (spends, reads, spends)}
    if handle.has(SPEND_AS):
        key, other = new_keys(2)
        ops["spend_as"] = (
            lambda ids: [handle.call("spend_as", rid, key) for rid in ids],
            reads,
            lambda ids: [handle.call("spend_as", rid, other) for rid in ids] + spends(ids),
        )
    if callable(getattr(handle.ledger, "spend_many", None)):
        many_reads = callable(getattr(handle.ledger, "is_spent_many", None))

        def batch(ids: list[str]) -> list[object]:
            return _per_id(handle.call("spend_many", ids), ids)

        def batch_reads(ids: list[str]) -> list[object]:
            if not many_reads:
                return reads(ids)
            got = _per_id(handle.call("is_spent_many", ids), ids)
            return [
                a if a == r else f"{a!r} (is_spent: {r!r})"
                for a, r in zip(got, reads(ids), strict=True)
            ]

        ops["spend_many"] = (batch, batch_reads, batch)
    if handle.has(MARKERS):
        markers = [closed_proven_marker]

        def mark(ids: list[str]) -> list[object]:
            return [handle.call("spend_marker", markers[0](rid)) for rid in ids]

        def marked(ids: list[str]) -> list[object]:
            got = [handle.call("is_marker_spent", markers[0](rid)) for rid in ids]
            ids_read = reads(ids)  # a marker is never the id itself
            return [
                g if r is not True else "the id itself reads spent"
                for g, r in zip(got, ids_read, strict=True)
            ]

        ops["markers"] = (mark, marked, mark)
    return ops


def _per_id(answers: object, ids: list[str]) -> list[object]:
    """A batch's answers, one per id (anything else: that, for every id)."""
    if isinstance(answers, list) and len(answers) == len(ids):
        return answers
    return [answers] * len(ids)


class C8Families:
    @C8()
    def test_C8_axes_families_every_operation(
        self, request: pytest.FixtureRequest, ledgers: Ledgers
    ) -> None:
        """Per operation and flavor, on a store of its own: each family's first member
        recorded, its siblings read unspent, then recorded as new; all recorded again:
        False."""
        problems: list[str] = []
        with replayable(ledgers) as axes:
            families = axes.families("c8")
            for flavor in FLAVORS:
                probe = ledgers.open(ledgers.label(f"families-{flavor}"), flavor)
                for op in _operations(probe):
                    handle = ledgers.open(ledgers.label(f"families-{flavor}-{op}"), flavor)
                    write, read, again = _operations(handle)[op]
                    where = f"{handle.flavor} {op}"
                    seen: set[str] = set()
                    for family in families:
                        members = [m for m in family if m not in seen]
                        seen.update(members)
                        if len(members) < 2:
                            continue
                        first, rest = members[0], members[1:]
                        steps = [
                            ("record", [first], write, True),
                            ("read", rest, read, False),
                            ("read", [first], read, True),
                            ("record", rest, write, True),
                            ("record again", members, again, False),
                        ]
                        for what, ids, call, expected in steps:
                            answers = call(ids)
                            wrong = [
                                f"{what} {shown(rid)} -> {a!r}"
                                for rid, a in zip(ids * 2, answers, strict=False)
                                if a is not expected and a is not None
                            ]
                            if wrong:
                                problems.append(
                                    f"{where}, family {[shown(m) for m in members]} with "
                                    f"{shown(first)} recorded first: {wrong[0]} (expected "
                                    f"{expected}: ids compare exactly)"
                                )
                                break
            assert not problems, (
                f"{len(problems)} look-alike famil(ies) merged:\n  "
                + "\n  ".join(problems[:8])
                + "\nUsual causes: an id decoded (percent, plus, HTML, backslash escapes), "
                "folded (case, width, Unicode compatibility), normalized or trimmed on one "
                "path, or a separator rewritten. Look at how that operation builds its key."
            )
