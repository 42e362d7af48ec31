"""C6 store identity: one store_id per backing store, a different one for any other."""

from __future__ import annotations

import pytest

from ..declare import declare
from ..harness import Handle, Ledgers
from .common import not_applicable, not_exercised

C6 = declare(
    "C6", "store identity: one store_id per store, another for any other or after a forget"
)


def _identity(handle: Handle) -> str | None:
    """The handle's store_id, checked for type, and for a reason when it is None."""
    value = handle.store_id
    if value is None:
        describe = getattr(handle.ledger, "describe", None)
        info = describe() if callable(describe) else None
        reason = getattr(info, "reason", None)
        has_reason = isinstance(reason, str) and bool(reason.strip())
        assert has_reason, "store_id is None but describe() gives no reason it cannot prove"
        return None
    assert isinstance(value, str), f"store_id must be a str or None, not {value!r}"
    assert value, "store_id is an empty str"
    return value


class C6Identity:
    @C6()
    def test_C6_same_store_same_id(self, ledgers: Ledgers) -> None:
        label = ledgers.label()
        first = ledgers.open(label)
        expected = _identity(first)
        second = ledgers.open(label)
        assert _identity(second) == expected, (
            f"two instances on one store report {expected!r} and {second.store_id!r}"
        )
        ledgers.close_handle(first)
        reopened = ledgers.open(label)
        assert _identity(reopened) == expected, (
            f"reopening the store changed store_id from {expected!r} to {reopened.store_id!r}"
        )
        other_flavor = ledgers.open(label, "async")
        assert _identity(other_flavor) == expected, (
            f"the {other_flavor.flavor} variant reports {other_flavor.store_id!r}, not {expected!r}"
        )

    @C6()
    def test_C6_different_stores_differ(self, ledgers: Ledgers) -> None:
        handles = [ledgers.open(ledgers.label(f"store{i}")) for i in range(3)]
        ids = [_identity(h) for h in handles]
        if all(i is None for i in ids):
            not_applicable("store_id is None (with a reason): there is no identity to compare")
        assert len(set(ids)) == len(ids), f"different stores share a store_id: {ids!r}"

    @C6()
    @pytest.mark.ledger_final
    def test_C6_store_id_stable_over_the_stores_life(self, ledgers: Ledgers) -> None:
        """One store, one store_id for its whole life: at open, after C2 volume's many
        spends, after the restart hook, and at the run's end (a new instance). An identity
        derived from something that changes (a segment or file generation, a server's run
        id, a record count) makes every proof made before the change unverifiable."""
        seen = list(ledgers.runtime.store_ids.get(ledgers.suite_key, ()))
        found = ledgers.runtime.volume.get(ledgers.suite_key)
        if not seen:
            not_exercised("C2 volume did not run (deselected), so the store had no long life")
        if found is not None:  # the volume passed: the store is there to open once more
            seen.append(("at the run's end (a new instance)", ledgers.open(found[0]).store_id))
        first = seen[0][1]
        changed = [f"{when}: {value!r}" for when, value in seen if value != first]
        assert not changed, (
            f"the store_id of one store changed over its life (at open: {first!r}; "
            + "; ".join(changed[:4])
            + "). Usual causes: an identity derived from something that changes (a record "
            "count, a file or segment generation, the server's run id, a random value per "
            "open) instead of read from one identity record written once. Look at where "
            "store_id is computed."
        )
