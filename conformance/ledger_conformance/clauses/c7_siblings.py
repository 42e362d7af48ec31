"""C7 over sibling stores whose names differ only in punctuation, case or a prefix.

Elsewhere stores differ by a counter; here they are named ``b:x``, ``b_x``, ``b-x``,
``b/x``, ``B``, ``p``/``px`` (namespaces of their own in a URL run, store labels for a
factory). A namespace encoding that sanitizes, folds case or matches a prefix merges
them: an id spent in one reads spent in its sibling, or lists there.
"""

from __future__ import annotations

from collections import Counter

from ..declare import NAMESPACES, SPENT_IDS
from ..harness import Handle, Ledgers
from .c7_isolation import C7
from .c8_ids import shown
from .common import assert_linearizable
from .drawn import replayable
from .l1_listing import listing


class C7Siblings:
    @C7()
    def test_C7_axes_sibling_stores(self, ledgers: Ledgers) -> None:
        """The same ids (short and 1024 bytes) spent in every sibling store of each name
        family: each store's first spend wins, reads see only its own, and its listing
        (when offered) holds only its own."""
        problems: list[str] = []
        with replayable(ledgers) as axes:
            for family in axes.names("c7"):
                labels = [ledgers.label(f"sibling-{name}") for name in family]
                handles = [
                    ledgers.open(label, "async" if n % 2 else "sync")
                    for n, label in enumerate(labels)
                ]
                ids = [*ledgers.ids(2, "sibling"), *axes.long_ids(ledgers.label("s"), "c7")[:1]]
                for name, handle in zip(family, handles, strict=True):
                    for rid in ids:
                        if handle.has_is_spent and handle.is_spent(rid) is not False:
                            problems.append(
                                f"{shown(rid)} reads spent in {name!r} before its spend"
                            )
                        if handle.spend(rid) is not True:
                            problems.append(f"{shown(rid)} in {name!r} lost to a sibling store")
                for name, handle in zip(family, handles, strict=True):
                    for rid in ids:
                        if handle.spend(rid) is not False:
                            problems.append(f"{shown(rid)} in {name!r} spent twice")
                    if handle.has(SPENT_IDS):  # a sibling's ids: twice, or foreign
                        counts = Counter(map(str, listing(handle)))
                        extra = sum(n - 1 for n in counts.values()) + len(set(counts) - set(ids))
                        if extra:
                            problems.append(
                                f"{name!r} lists {extra} more id(s) than its own "
                                f"{len(ids)}: a sibling store's"
                            )
                problems += _namespaces(ledgers, handles[0], labels, family)
            assert not problems, (
                "sibling stores collide:\n  "
                + "\n  ".join(problems[:8])
                + "\nUsual causes: a namespace sanitized into a table, key or file name "
                "(punctuation to '_', lowercased), a key or listing that matches the "
                "namespace as a prefix. Look at how the namespace enters the key."
            )
            assert_linearizable(ledgers, "C7")


def _namespaces(
    ledgers: Ledgers, handle: Handle, labels: list[str], family: tuple[str, ...]
) -> list[str]:
    """With ``namespaces()``: none listed twice; and with a factory that names its
    namespaces (a URL run), each sibling exactly once."""
    if not handle.has(NAMESPACES):
        return []
    listed = Counter(map(str, listing(handle, "namespaces")))
    twice = [name for name, n in listed.items() if n > 1]
    if twice:
        return [f"namespaces() lists {len(twice)} namespace(s) twice: {twice[:3]}"]
    if not callable(getattr(ledgers.factory, "namespace_of", None)):
        return []
    named = [(name, ledgers.namespace(label)) for name, label in zip(family, labels, strict=True)]
    return [
        f"namespaces() lists {name!r} ({namespace!r}) {listed[namespace]} time(s)"
        for name, namespace in named
        if listed[namespace] != 1
    ]
