"""C6 opening: a ledger asked for a store that exists (``create=false``) refuses one that
does not, and creates nothing: asked first on its own, then once a sibling store exists.

A mistyped path or namespace that opens as a new, empty store reads "not spent" for
every id spent in the store that was meant, under a ``store_id`` of its own: the one
promise a read and a migration's source must keep (C6, "Opening a store"). In URL mode
the store is a namespace of the URL's store (``namespace=`` and ``create=false``); a
factory is asked only if it says it honours ``LedgerContext.create``
(``offers_create = True``), and its label names whatever store it maps labels to.
"""

from __future__ import annotations

import pytest

from ledger_core.errors import LedgerError

from ..context import Flavor
from ..harness import Handle, Ledgers, error_text
from .c6_identity import C6
from .common import expect_bool, not_applicable, not_exercised

PROBE_ID = "c6-opening-probe"


def _open_missing(ledgers: Ledgers, label: str, flavor: Flavor) -> Handle | None:
    """``create=false`` on ``label``: ``None`` when refused with a ``LedgerError``."""
    try:
        return ledgers.open(label, flavor, create=False)
    except LedgerError:
        return None
    except Exception as exc:
        pytest.fail(
            f"create=false on a store that does not exist raised {error_text(exc)}, not a "
            "LedgerError (C4: every failure a host can catch)",
            pytrace=False,
        )


class C6Opening:
    @C6()
    @pytest.mark.parametrize("flavor", ["sync", "async"])
    def test_C6_open_missing(self, ledgers: Ledgers, flavor: Flavor) -> None:
        if not getattr(ledgers.factory, "offers_create", False):
            not_exercised(
                "the factory does not say it honours LedgerContext.create "
                "(an offers_create = True attribute); URL mode always does"
            )
        label = ledgers.label(f"missing-{flavor}")
        attempts = [
            "an open",
            # In URL mode the URL's store (table, file) surely exists now: only the
            # namespace is missing. And the first open must have created nothing.
            "an open after a sibling store was made",
        ]
        for attempt in attempts:
            if attempt != attempts[0]:
                ledgers.open(ledgers.label(f"sibling-{flavor}"), flavor)
            handle = _open_missing(ledgers, label, flavor)
            if handle is None:
                continue
            if handle.store_id is None:
                not_applicable("store_id is None: a ledger that never proves has no store to miss")
            answer = handle.call("is_spent", PROBE_ID) if handle.has_is_spent else "-"
            pytest.fail(
                f"{attempt} with create=false on a store that does not exist "
                f"(label {label!r}, namespace {ledgers.namespace(label)!r}) succeeded: it "
                f"reports store_id {handle.store_id!r} and is_spent answers {answer!r}. A "
                "mistyped path or namespace then reads 'not spent' for every id. Usual "
                "causes: the open writes the namespace's genesis (or creates the table, "
                "file or key) before it looks at create, or ignores it",
                pytrace=False,
            )
        made = ledgers.open(label, flavor)  # created now (create is not asked)
        assert expect_bool(made.call("spend", PROBE_ID), "spend") is True
        opened = ledgers.open(label, flavor, create=False)
        assert opened.store_id == made.store_id, (
            f"create=false on the store just created reports {opened.store_id!r}, not "
            f"{made.store_id!r}"
        )
        assert opened.reads_spent(PROBE_ID), "create=false opened another store than the one made"
