"""C6 after restore: a store restored from a backup is another store.

A restore brings back the genesis the backup holds, so a store that cannot detect it
would report its old ``store_id`` while every id spent after the snapshot reads unspent.
The restore hook snapshots the store, then restores the snapshot; the after-restore step
is the store's documented procedure (``decision-ledger reidentify``; none for a store
that detects restores itself). Then no instance opened before or after that reports the
old ``store_id`` may answer ``True`` for an id spent before the restore, nor ``False``
from ``is_spent`` for one spent after the snapshot; a ``LedgerError`` is fine. The hook
loses spends, so this clause runs last.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import pytest

from ledger_core.errors import LedgerError

from ..declare import RESTORE
from ..harness import Ledgers
from ..hooks import RESTORE as RESTORING
from ..hooks import SNAPSHOT, after_restore, restore_phase
from .c6_forget import (
    answers_for_forgotten,
    new_instance_problems,
    run_hook,
    spent_store,
    verdict,
)
from .c6_identity import C6
from .common import expect_bool, note, open_both, partly

Hook = Callable[..., object] | None
RESTORED = "the id was spent before the restore"


class C6Restore:
    @C6(RESTORE)
    @pytest.mark.ledger_forgets
    def test_C6_restore(
        self,
        ledgers: Ledgers,
        ledger_restore: Hook,
        ledger_after_restore: Hook,
        request: pytest.FixtureRequest,
    ) -> None:
        """Spend, snapshot, spend more, restore, take the after-restore step: instances
        opened before fail closed or answer as another store, and new ones too."""
        assert ledger_restore is not None  # the RESTORE need skipped the test otherwise
        label = ledgers.label("restored")
        namespace = ledgers.namespace(label)
        old = open_both(ledgers, label)
        first, before = spent_store(ledgers, old, "before")
        run_hook(ledgers, partial(restore_phase, ledger_restore, SNAPSHOT, namespace), "restore")
        after = ledgers.ids(len(before), "after")
        for request_id in after:
            assert expect_bool(old[0].call("spend", request_id), "spend") is True
        run_hook(ledgers, partial(restore_phase, ledger_restore, RESTORING, namespace), "restore")
        if ledger_after_restore is None:
            note(request, "no after-restore step: the store must detect the restore itself")
        else:
            run_hook(ledgers, partial(after_restore, ledger_after_restore, namespace), "after")
        ids = before + after
        problems: list[str] = []
        for handle in old:  # first: a new instance's spends would hide what these answer
            who = f"the {handle.flavor} instance opened before the restore"
            problems += answers_for_forgotten(handle, first, ids, who, why=RESTORED)
        if _restored_nothing(ledgers, label, after[0]):
            partly(
                request,
                "the restore hook restored nothing: an id spent after the snapshot still "
                "reads spent on a new instance",
            )
        flavors = list(dict.fromkeys(h.flavor for h in old))
        problems += new_instance_problems(ledgers, label, flavors, first, ids)
        verdict(problems, "the store was restored from a snapshot")


def _restored_nothing(ledgers: Ledgers, label: str, spent_after: str) -> bool:
    """Whether a new instance still reads an id spent after the snapshot as spent (a
    refusal, or a ledger without ``is_spent``, tells nothing: ``False``)."""
    try:
        handle = ledgers.open(label)
        return handle.has_is_spent and handle.call("is_spent", spent_after) is True
    except LedgerError:
        return False
