"""H3 markers across two stores: a close recorded in one store proves nothing in another.

Markers are otherwise only tested within one store; a ledger that keeps them in a space
of their own outside the namespace (one marker table per file, keys without the store's
prefix) makes a close in one store a close in every sibling: a request there is then
told ``closed-by-host`` and never runs. Subjects: a short, a 1024-byte and edge ids.
"""

from __future__ import annotations

from ledger_core import host
from ledger_core.host import ResolveVerdict
from ledger_core.ids import MarkerKind, closed_proven_marker, marker_id

from ..context import Flavor
from ..declare import MARKERS
from ..harness import Handle, Ledgers
from .c8_ids import EDGE_IDS, shown
from .common import not_applicable
from .drawn import replayable
from .host_rules import H3, _close, _resolve

FLAVORS: tuple[Flavor, ...] = ("sync", "async")


def _crossed(ledgers: Ledgers, home: Handle, away: Handle, subject: str) -> list[str]:
    """Close ``subject`` in ``home``; ``away`` must not see the close."""
    where = f"{home.flavor}, {shown(subject)} closed in one store"
    closure = _close(ledgers, home, host.mint(home.ledger, subject))
    if (
        not closure.proven
        or home.call("is_marker_spent", closed_proven_marker(subject)) is not True
    ):
        return [f"{where}: the close was not proven and recorded there ({closure.reason})"]
    problems = []
    if away.call("is_marker_spent", closed_proven_marker(subject)) is not False:
        problems.append(f"{where}: its marker reads spent in the other store")
    if away.has_is_spent and away.call("is_spent", subject) is not False:
        problems.append(f"{where}: the id reads spent in the other store")
    answered = _resolve(ledgers, away, host.mint(away.ledger, subject))
    if answered.verdict is not ResolveVerdict.RUN:
        problems.append(
            f"{where}: the same request in the other store gave {answered.verdict.value}, not run"
        )
    return problems


class H3TwoStores:
    @H3(MARKERS)
    def test_H3_axes_markers_in_two_stores(self, ledgers: Ledgers) -> None:
        """Closes (and a lineage marker) recorded in one of two stores, each
        direction, sync and async: the other store never sees them."""
        problems: list[str] = []
        exercised: list[str] = []
        with replayable(ledgers) as axes:
            edges = axes.edge_ids(EDGE_IDS, "h3", 2)
            for flavor in FLAVORS:
                one = ledgers.open(ledgers.label(f"marks-{flavor}-one"), flavor)
                two = ledgers.open(ledgers.label(f"marks-{flavor}-two"), flavor)
                if one.flavor != flavor or not one.has(MARKERS) or one.store_id is None:
                    continue  # H3's other parts say why (no variant, no markers, no store_id)
                exercised.append(flavor)
                long = axes.long_ids(ledgers.label(f"subject-{flavor}"), "h3")
                subjects = [*ledgers.ids(2, f"subject-{flavor}"), long[0], long[1], *edges]
                for n, subject in enumerate(subjects):
                    home, away = (one, two) if n % 2 == 0 else (two, one)
                    problems += _crossed(ledgers, home, away, subject)
                source = f"{ledgers.label('source')}-{flavor}"
                one.call("spend_marker", marker_id(MarkerKind.LINEAGE, source))
                if two.call("is_marker_spent", marker_id(MarkerKind.LINEAGE, source)) is not False:
                    problems.append(f"{flavor}: a lineage recorded in one store reads in the other")
            if not exercised:
                not_applicable("no variant with markers and a store_id: no close is recorded")
            assert not problems, (
                "markers cross stores:\n  "
                + "\n  ".join(problems[:8])
                + "\nUsual causes: markers kept outside the store's namespace (a marker "
                "table or key prefix shared by every namespace of the file or server). "
                "Look at spend_marker and is_marker_spent."
            )
