"""The scratch-removal hook (``Backend.remove_scratch(url, prefix)``), exercised the same
way on every backend against its real server: written once here, called from each
backend's tests with that backend's URL.

Inside the prefix: namespaces that hold ids, a marker and (where the layout has one) a
genesis, some with names a pattern language would misread. Outside: names that contain
the prefix later, the prefix minus its last character, the prefix in another case, the
names just below and at the exclusive upper bound of its byte range, and an id in
another namespace that *is* the prefix (a key pattern that matched it would take it).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from ledger_core import open_ledger
from ledger_core.errors import ScratchRefused
from ledger_core.ids import marker_id
from ledger_core.registry import testing_hook
from ledger_core.urls import LedgerURL

# What a hook must refuse before any I/O: nothing a check did not name itself.
NOT_SCRATCH = [
    "",
    "ledger-conformance-",
    "ledger-conformance-a1b2c3",  # no trailing separator: would take "...a1b2c3x-..."
    "ledger-conformance-A1B2C3-",
    "ledger-conformance-a1%b2c3-",
    "ledger-conformance-a1.*c3-",
    "prod-a1b2c3-",
    "ledger-",
    "%",
    "*",
]
MARKER = marker_id("scratch-test", "subject")


def new_prefix() -> str:
    return f"ledger-conformance-{secrets.token_hex(4)}-"


def inside(prefix: str) -> list[str]:
    return [prefix + "a", prefix + "%_\\*?[x]{t}.^$", prefix + "z" * 150]


def outside(prefix: str) -> list[str]:
    stem = prefix[:-1]
    return [
        "x" + prefix + "middle",  # the prefix later in the name
        stem,  # the prefix minus its last character
        prefix.upper() + "a",  # another case
        stem + ",below",  # just below the range
        stem + ".",  # the range's exclusive upper bound ('-' + 1) itself
        stem + ".at-the-bound",
        stem + "_x",  # a LIKE '_' would take it
        stem + "%",
        stem + "*",  # a glob '*' would take it
        "1:" + prefix,  # looks like a length-prefixed key
    ]


@contextmanager
def _ledger(url: str, namespace: str, **options: Any) -> Iterator[Any]:
    ledger: Any = open_ledger(url, namespace=namespace, **options)
    try:
        yield ledger
    finally:
        ledger.close()


def fill(url: str, namespace: str, prefix: str) -> str | None:
    """Spend ids and a marker in ``namespace``; its store_id."""
    with _ledger(url, namespace) as ledger:
        assert ledger.spend("one")
        assert ledger.spend(prefix + "id")  # an id that IS the prefix, in any namespace
        assert ledger.spend_marker(MARKER)
        store_id: str | None = ledger.store_id
        return store_id


def remove(url: str, prefix: str) -> int:
    parsed = LedgerURL.parse(url)
    hook = testing_hook(parsed.scheme, "remove_scratch")
    assert hook is not None, f"the {parsed.scheme} backend has no remove_scratch hook"
    return hook(parsed, prefix)


def exercise(url: str) -> None:
    """Fill, remove, and prove exactly the scratch namespaces went."""
    prefix = new_prefix()
    ours, theirs = inside(prefix), outside(prefix)
    ids = {name: fill(url, name, prefix) for name in ours + theirs}
    assert remove(url, prefix) == len(ours)

    with _ledger(url, theirs[0], create=False) as lister:
        listed = list(lister.namespaces())
    assert not [name for name in listed if name.startswith(prefix)], listed
    assert set(theirs) <= set(listed), sorted(set(theirs) - set(listed))
    for name in theirs:  # every other namespace untouched, identity unchanged
        with _ledger(url, name, create=False) as ledger:
            assert ledger.store_id == ids[name], name
            assert ledger.spend("one") is False, name
            assert ledger.is_spent(prefix + "id"), name
            assert ledger.is_marker_spent(MARKER), name
    for name in ours:  # a fresh ledger of a removed namespace has nothing spent
        with _ledger(url, name) as ledger:
            assert not ledger.is_spent("one"), name
            assert not ledger.is_spent(prefix + "id"), name
            assert not ledger.is_marker_spent(MARKER), name
    # The fresh ledgers' namespaces (a genesis each, where the layout has one), then none.
    assert remove(url, prefix) in (0, len(ours))
    assert remove(url, prefix) == 0


def refuses(url: str) -> None:
    """Every non-scratch prefix is refused before any I/O, and nothing is removed."""
    name = "kept-" + secrets.token_hex(4)
    fill(url, name, "ledger-")
    for bad in NOT_SCRATCH:
        with pytest.raises(ScratchRefused, match="only a check's own scratch prefix"):
            remove(url, bad)
    with _ledger(url, name, create=False) as ledger:
        assert ledger.is_spent("one")
