"""C7 isolation: stores (namespaces) that a naive key encoding would merge stay apart."""

from __future__ import annotations

from ..declare import declare
from ..harness import Ledgers
from .common import assert_linearizable, expect_bool

# Separators a naive "namespace + sep + id" encoding might use; "" is plain concatenation.
SEPARATORS = (":", "/", "|", ".", "-", "_", " ", "")

C7 = declare("C7", "isolation: stores never collide under any key encoding")


class C7Isolation:
    @C7()
    def test_C7_no_collision_under_concatenation(self, ledgers: Ledgers) -> None:
        collisions: list[str] = []
        for n, sep in enumerate(SEPARATORS):
            # label + sep + id is the same text for both pairs.
            left = ledgers.open(ledgers.label(f"n{n}"))
            right = ledgers.open(ledgers.label(f"n{n}{sep}x"))
            left_id, right_id = f"x{sep}y", "y"
            assert expect_bool(left.spend(left_id), "spend") is True
            if right.has_is_spent and right.is_spent(right_id) is not False:
                collisions.append(f"is_spent sees {left_id!r} of store A as {right_id!r} of B")
            if right.spend(right_id) is not True:
                collisions.append(f"spend of {right_id!r} in B lost to {left_id!r} in A ({sep!r})")
        assert not collisions, "stores collide:\n  " + "\n  ".join(collisions)
        assert_linearizable(ledgers, "C7")

    @C7()
    def test_C7_same_id_in_two_stores(self, ledgers: Ledgers) -> None:
        first = ledgers.open(ledgers.label("a"))
        second = ledgers.open(ledgers.label("b"))
        for request_id in ledgers.ids(5):
            assert first.spend(request_id) is True
            if second.has_is_spent:
                assert second.is_spent(request_id) is False, (
                    f"{request_id!r} spent in one store reads as spent in another"
                )
            assert second.spend(request_id) is True, (
                f"{request_id!r} spent in one store cannot be spent in another"
            )
            assert first.spend(request_id) is False
        assert_linearizable(ledgers, "C7")
