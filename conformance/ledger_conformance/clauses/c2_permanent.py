"""C2 permanent: a recorded id stays recorded across instances, time and restarts."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest

from ..declare import RESTART, declare
from ..harness import Acked, Handle, Ledgers
from ..history import FINAL, History
from ..profile import PROFILES
from .common import assert_linearizable, expect_bool, not_exercised, note, wait_out
from .restart import run_restart, wait_until_serving

C2 = declare("C2", "permanent: spent ids survive reopen, new instances, time, restarts")


def _still_spent(handle: Handle, ids: list[str], process: str) -> list[str]:
    """The ids that no longer read as spent (is_spent, or a spend that must answer False)."""
    lost: list[str] = []
    for request_id in ids:
        if handle.has_is_spent:
            value = handle.is_spent(request_id, process)
        else:
            value = not handle.spend(request_id, process)
        if value is not True:
            lost.append(request_id)
    return lost


def _spent_store(
    ledgers: Ledgers, name: str = "store", count: int = 20, tag: str = "id"
) -> tuple[str, Handle, list[str]]:
    """A fresh store with ``count`` ids spent on it: (label, the handle they were spent
    by, ids)."""
    label = ledgers.label(name)
    first = ledgers.open(label)
    ids = ledgers.ids(count, tag)
    for request_id in ids:
        assert expect_bool(first.spend(request_id), "spend") is True
    return label, first, ids


class C2Permanent:
    @C2()
    def test_C2_reopen(self, ledgers: Ledgers) -> None:
        label, first, ids = _spent_store(ledgers)
        ledgers.close_handle(first)
        reopened = ledgers.open(label)
        lost = _still_spent(reopened, ids, "reopened")
        assert not lost, f"{len(lost)} id(s) not spent after close and reopen: {lost[:3]!r}"
        assert_linearizable(ledgers, "C2")

    @C2()
    def test_C2_fresh_instance(self, ledgers: Ledgers) -> None:
        label, _, ids = _spent_store(ledgers)
        fresh = ledgers.open(label)
        lost = _still_spent(fresh, ids, "fresh")
        assert not lost, f"{len(lost)} id(s) not spent through a fresh instance: {lost[:3]!r}"
        for request_id in ids:
            assert fresh.spend(request_id) is False, f"{request_id!r} spent twice"
        assert_linearizable(ledgers, "C2")

    @C2()
    @pytest.mark.ledger_first
    def test_C2_after_waiting_begins(self, ledgers: Ledgers) -> None:
        """Spends the ids C2 re-reads at the end: the wait runs behind the other clauses."""
        label, _, ids = _spent_store(ledgers, "waiting", 10, "waiting")
        ledgers.runtime.waiting[ledgers.suite_key] = (label, ids, time.monotonic())

    @C2()
    @pytest.mark.ledger_final
    def test_C2_after_waiting(self, request: pytest.FixtureRequest, ledgers: Ledgers) -> None:
        started = ledgers.runtime.waiting.get(ledgers.suite_key)
        if started is None:  # the first part was deselected: spend now and wait it all
            label, _, ids = _spent_store(ledgers, "waiting", 10, "waiting")
            since = time.monotonic()
        else:
            label, ids, since = started
        slept, waited = wait_out(ledgers, since, ledgers.profile.expiry_wait)
        longest = max(p.expiry_wait for p in PROFILES.values())
        note(
            request,
            f"re-read {waited:.1f} s after the last spend ({slept:.1f} s of it an added wait): "
            f"a TTL under {ledgers.profile.expiry_wait:g} s fails every {ledgers.profile.name} "
            f"run; a TTL over {longest:g} s is beyond every profile (thorough waits "
            f"{longest:g} s), as is a store that forgets after an hour or a day: the "
            "backend's own configuration check (at open and on its re-check period) must "
            "refuse that",
        )
        lost = _still_spent(ledgers.open(label), ids, "waited")
        # No history check here: the spends were recorded by the first part's test.
        assert not lost, (
            f"{len(lost)} id(s) forgotten {waited:.1f} s after their spend: {lost[:3]!r}. Usual "
            "causes: a TTL on the records (a cache's default expiry, EXPIRE, a TTL index), an "
            "eviction policy (Redis maxmemory-policy other than noeviction). Look at how "
            "spend writes its record and at the store's expiry configuration."
        )

    @C2(RESTART)
    def test_C2_server_restart(
        self,
        request: pytest.FixtureRequest,
        ledgers: Ledgers,
        ledger_restart: Callable[[], object] | None,
    ) -> None:
        assert ledger_restart is not None  # the RESTART need skipped the test otherwise
        label, first, ids = _spent_store(ledgers, count=10)
        returned = run_restart(ledgers, ledger_restart)
        # The old instance may fail while it reconnects (or while the store is not yet
        # serving), but it must never read False.
        for request_id in ids:
            try:
                value = first.is_spent(request_id, "old") if first.has_is_spent else True
            except Exception:
                continue
            assert value is True, f"{request_id!r} read {value!r} after a server restart"
        wait_until_serving(ledgers, label, ids[0], returned, request)
        lost = _still_spent(ledgers.open(label), ids, "restarted")
        assert not lost, f"{len(lost)} id(s) lost in a server restart: {lost[:3]!r}"
        assert_linearizable(ledgers, "C2")

    @C2()
    @pytest.mark.ledger_final
    def test_C2_every_acknowledged_id_still_spent(self, ledgers: Ledgers) -> None:
        """Jepsen's set check: every id acknowledged anywhere in this run is still spent."""
        if ledgers.runtime.forgot:
            not_exercised(
                "the forget hook already ran in this session (the suite's order was changed), "
                "so lost ids would prove nothing"
            )
        acked = list(ledgers.acked)
        if not acked:
            not_exercised("no spend was acknowledged earlier in this run")
        # One acknowledgement per id: a second True for one id is a C1 failure, reported
        # by the clause that saw it; here only the first one to complete is the witness
        # that the id was recorded (so a double spend does not fail C2 as well).
        witness: dict[tuple[str, str], Acked] = {}
        for entry in acked:
            known = witness.get((entry.label, entry.request_id))
            if known is None or entry.op.complete_ns < known.op.complete_ns:
                witness[(entry.label, entry.request_id)] = entry
        history = History(a.op for a in witness.values())
        by_label: dict[str, list[str]] = {}
        for entry in acked:
            by_label.setdefault(entry.label, []).append(entry.request_id)

        def reread(label: str) -> None:
            handle = ledgers.open(label)
            try:
                for request_id in dict.fromkeys(by_label[label]):
                    if handle.has_is_spent:
                        handle.is_spent(request_id, FINAL)
                    else:
                        handle.spend(request_id, FINAL)  # must answer False
            finally:
                ledgers.close_handle(handle)

        # A fresh instance per store, the stores side by side: opening is the slow part on
        # a store whose client is costly to build (boto3's), and reads change nothing.
        # Each is closed once read: a run touches hundreds of stores (M1, the axes), and
        # an instance per store held to the end filled a server's connection limit.
        workers = ledgers.profile.volume_workers
        with ThreadPoolExecutor(workers, thread_name_prefix="ledger-final") as pool:
            for done in [pool.submit(reread, label) for label in by_label]:
                done.result()  # what a read raised fails the clause, as it did in sequence
        final_ops = [op for op in ledgers.history.ops if op.process == FINAL]
        history.extend(final_ops)
        ledgers.history = history
        assert_linearizable(ledgers, "C2")
