"""C3 read without recording: is_spent is exact, current, and never records."""

from __future__ import annotations

import threading

from ..declare import declare
from ..harness import CALL_BOUND, Ledgers
from .common import assert_linearizable, expect_bool, require_is_spent, run_threads

C3 = declare("C3", "is_spent is exact and current, and never records")


class C3Reads:
    @C3()
    def test_C3_before_and_after(self, ledgers: Ledgers) -> None:
        label = ledgers.label()
        writer = ledgers.open(label)
        reader = ledgers.open(label)
        require_is_spent(writer)
        for request_id in ledgers.ids(10):
            for handle in (writer, reader):
                assert expect_bool(handle.is_spent(request_id), "is_spent") is False, (
                    f"{request_id!r} read as spent before any spend"
                )
            assert expect_bool(writer.spend(request_id), "spend") is True
            for handle in (writer, reader):  # immediately after: no stale reads anywhere
                assert expect_bool(handle.is_spent(request_id), "is_spent") is True, (
                    f"{request_id!r} read as not spent right after its spend returned True"
                )
        assert_linearizable(ledgers, "C3")

    @C3()
    def test_C3_never_records(self, ledgers: Ledgers) -> None:
        handle = ledgers.open(ledgers.label())
        require_is_spent(handle)
        for request_id in ledgers.ids(10):
            for _ in range(3):
                assert expect_bool(handle.is_spent(request_id), "is_spent") is False, (
                    f"is_spent({request_id!r}) answered True for an id nobody spent"
                )
            assert handle.spend(request_id) is True, (
                f"spend({request_id!r}) after is_spent did not return True: is_spent recorded it"
            )
        assert_linearizable(ledgers, "C3")

    @C3()
    def test_C3_reads_racing_spends(self, ledgers: Ledgers) -> None:
        label = ledgers.label()
        handles = [ledgers.open(label) for _ in range(2)]
        require_is_spent(handles[0])
        ids = ledgers.ids(max(10, ledgers.profile.ids // 5))
        workers = 16
        barrier = threading.Barrier(workers)
        errors: list[str] = []

        def worker(i: int) -> None:
            handle = handles[i % 2]
            for request_id in ids:
                barrier.wait(CALL_BOUND)
                try:
                    if i % 4 == 0:
                        handle.spend(request_id, f"t{i}")
                    else:
                        handle.is_spent(request_id, f"t{i}")
                except Exception as exc:
                    errors.append(f"{type(exc).__name__}: {exc}")

        run_threads(workers, worker, CALL_BOUND * 5)
        assert not errors, f"{len(errors)} call(s) raised without any fault: {errors[0]}"
        for request_id in ids:
            assert handles[1].is_spent(request_id, "after") is True
        assert_linearizable(ledgers, "C3")
