"""The online switch (issue 13): a fleet moves from an old store to a new one host by host.

The fleet test runs two groups of OS processes through the phases, group A one phase
ahead of group B, every process spending the same ids at once (barrier-released): the
fresh ids of each step, and every id spent in an earlier step. No id may answer ``True``
twice across all processes and steps; each fresh id answers ``True`` exactly once (no
decision is lost either). Half the processes use the async bridge. A broken bridge (it
trusts the new store and mirrors into the old one without looking) is caught by the same
test.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import random
import threading
import uuid
from collections import Counter
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import pytest

from ledger_core import (
    AmbiguousSpend,
    AsyncMemoryLedger,
    CloseVerdict,
    LedgerError,
    LedgerUnavailable,
    MemoryLedger,
    ResolveVerdict,
    close_pause,
    migrate,
    migration_state,
    mint,
    open_async_ledger,
    open_ledger,
    resolve,
    setup_ledger,
    spend_landed,
    store_id_of,
)
from ledger_core.bridge import (
    AsyncBridge,
    Bridge,
    open_async_bridge,
    open_bridge,
)
from ledger_core.host import LandedVerdict
from ledger_core.migrate import IncompleteMigration, MigrationError
from ledger_sqlite import SQLiteLedger
from tests.postgres.conftest import pg_server  # noqa: F401 (the session's PostgreSQL)
from tests.servers.postgres import PostgresServer

WAIT = 300.0  # seconds: a bound on waiting for a worker, never an asserted duration
GROUP = 2  # processes per group
FRESH = 60  # new ids per step


# -- the fleet ------------------------------------------------------------------------


class NewFirstUnchecked:
    """A broken phase-1/2 bridge: the new store decides, the old one is written without
    looking at its answer. Beside hosts on the old store, an id they spent (and ran)
    answers ``True`` again here."""

    def __init__(self, old: Any, new: Any) -> None:
        self.old, self.new = old, new
        self.store_id = old.store_id

    def spend(self, request_id: str) -> bool:
        won = bool(self.new.spend(request_id))
        self.old.spend(request_id)
        return won

    async def aspend(self, request_id: str) -> bool:
        won = bool(await self.new.spend(request_id))
        await self.old.spend(request_id)
        return won

    def close(self) -> None:
        self.new.close()
        self.old.close()


def _open_sync(phase: int, old: str, new: str, broken: bool) -> Any:
    if phase == 0:
        return open_ledger(old, create=False)
    if phase == 3:
        return open_ledger(new)
    if broken:
        return NewFirstUnchecked(
            open_ledger(old, create=False), open_ledger(new, allow_incomplete=True)
        )
    return open_bridge(old, new, answer_as="old" if phase == 1 else "new")


async def _open_async(phase: int, old: str, new: str, broken: bool) -> Any:
    if phase == 0:
        return await open_async_ledger(old, create=False)
    if phase == 3:
        return await open_async_ledger(new)
    if broken:
        return NewFirstUnchecked(
            await open_async_ledger(old, create=False),
            await open_async_ledger(new, allow_incomplete=True),
        )
    return await open_async_bridge(old, new, answer_as="old" if phase == 1 else "new")


def _spend_sync(ledger: Any, ids: list[str], barrier: Any) -> list[str]:
    barrier.wait(WAIT)
    try:
        return [rid for rid in ids if ledger.spend(rid) is True]
    finally:
        ledger.close()


async def _spend_async(ledger: Any, ids: list[str], barrier: Any) -> list[str]:
    spend = ledger.aspend if isinstance(ledger, NewFirstUnchecked) else ledger.spend
    barrier.wait(WAIT)  # blocks the loop: nothing else runs on it yet
    try:
        answers = await asyncio.gather(*(spend(rid) for rid in ids))
    finally:
        if isinstance(ledger, NewFirstUnchecked):
            await ledger.old.aclose()
            await ledger.new.aclose()
        else:
            await ledger.aclose()
    return [rid for rid, won in zip(ids, answers, strict=True) if won is True]


async def _step_async(
    phase: int, old: str, new: str, broken: bool, ids: list[str], barrier: Any
) -> list[str]:
    return await _spend_async(await _open_async(phase, old, new, broken), ids, barrier)


def _host(conn: Connection, barrier: Any, old: str, new: str, use_async: bool) -> None:
    """One host process: for each step, open the ledger of its phase, wait for the others,
    spend every id, report the ids it won. A failure is reported, never hidden."""
    while True:
        order = conn.recv()
        if order is None:
            return
        phase, ids, broken = order
        try:
            if use_async:
                won = asyncio.run(_step_async(phase, old, new, broken, ids, barrier))
            else:
                won = _spend_sync(_open_sync(phase, old, new, broken), ids, barrier)
            conn.send(("won", won))
        except BaseException as exc:
            barrier.abort()  # never leave the others waiting
            conn.send(("error", f"{type(exc).__name__}: {exc}"))


class Fleet:
    """Two groups of host processes driven step by step from the test."""

    def __init__(self, old: str, new: str) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.barrier = ctx.Barrier(2 * GROUP)
        self.pipes: list[Connection] = []
        self.procs = []
        for n in range(2 * GROUP):
            mine, theirs = ctx.Pipe()
            proc = ctx.Process(
                target=_host, args=(theirs, self.barrier, old, new, n % 2 == 1), daemon=True
            )
            proc.start()
            self.pipes.append(mine)
            self.procs.append(proc)

    def step(self, phase_a: int, phase_b: int, ids: list[str], broken: bool) -> list[list[str]]:
        for n, pipe in enumerate(self.pipes):
            phase = phase_a if n < GROUP else phase_b
            order = list(ids)
            random.Random(n).shuffle(order)  # each host meets the ids in its own order
            pipe.send((phase, order, broken))
        results = []
        for pipe in self.pipes:
            assert pipe.poll(WAIT), "a host process did not answer"
            kind, value = pipe.recv()
            assert kind == "won", value
            results.append(value)
        return results

    def stop(self) -> None:
        for pipe in self.pipes:
            pipe.send(None)
        for proc in self.procs:
            proc.join(WAIT)


@pytest.fixture(params=["sqlite", "postgres"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """(old, new): SQLite to SQLite, or SQLite to PostgreSQL (both created up front)."""
    old, new = f"sqlite:///{tmp_path}/old.db", f"sqlite:///{tmp_path}/new.db"
    if request.param == "postgres":
        server: PostgresServer = request.getfixturevalue("pg_server")
        new = f"{server.url}?table=fleet_{uuid.uuid4().hex[:10]}"
    for url in (old, new):
        setup_ledger(url)
    return old, new


# (group A's phase, group B's phase): A is one phase ahead of B where they differ.
# 0 old store, 1 bridge answering as old, 2 bridge answering as new, 3 new store.
STEPS = [(0, 0), (1, 0), (1, 1), (2, 1), (3, 2), (3, 3)]
COPY_STEP = 2  # every host is on a bridge: the offline copy runs during this step


def _run_fleet(old: str, new: str, broken: bool, steps: list[tuple[int, int]]) -> Counter[str]:
    """Every True of every host in every step, counted by id."""
    wins: Counter[str] = Counter()
    spent: list[str] = []
    fleet = Fleet(old, new)
    try:
        for number, (phase_a, phase_b) in enumerate(steps):
            fresh = [f"s{number}-{k}" for k in range(FRESH)]
            copy: threading.Thread | None = None
            errors: list[BaseException] = []
            if number == COPY_STEP and not broken:
                copy = threading.Thread(target=_copy, args=(old, new, errors))
                copy.start()  # online: the copy runs while the hosts spend
            results = fleet.step(phase_a, phase_b, fresh + spent, broken)
            if copy is not None:
                copy.join(WAIT)
                assert not errors, errors
                finished: Any = open_ledger(new)  # refused were the copy unfinished
                finished.close()
            for won in results:
                wins.update(won)
            if not broken:
                step_wins = Counter(rid for won in results for rid in won)
                assert all(step_wins[rid] == 1 for rid in fresh), (number, step_wins)
                assert not any(step_wins[rid] for rid in spent), number
            spent += fresh
            if number == 1 and not broken:
                # Before the copy: no host may go new-only, nor answer as the new store.
                with pytest.raises(IncompleteMigration):
                    open_ledger(new)
                with pytest.raises(IncompleteMigration):
                    open_bridge(old, new, answer_as="new")
    finally:
        fleet.stop()
    return wins


def _copy(old: str, new: str, errors: list[BaseException]) -> None:
    source: Any = open_ledger(old, create=False)
    target: Any = open_ledger(new, allow_incomplete=True)
    try:
        report = migrate(source, target)
        assert report.resumed  # it finished the run the phase-1 bridges opened: no merge
        assert migration_state(target) is None
    except BaseException as exc:
        errors.append(exc)
    finally:
        target.close()
        source.close()


def test_a_fleet_moves_host_by_host_and_no_id_wins_twice(stores: tuple[str, str]) -> None:
    old, new = stores
    wins = _run_fleet(old, new, broken=False, steps=STEPS)
    assert len(wins) == FRESH * len(STEPS)
    assert max(wins.values()) == 1
    # The new store holds everything the fleet ever spent, and is the old one's successor.
    survivor: Any = open_ledger(new)
    try:
        assert sorted(survivor.spent_ids()) == sorted(wins)
    finally:
        survivor.close()


def test_the_fleet_test_catches_a_bridge_that_trusts_the_new_store(tmp_path: Path) -> None:
    old, new = f"sqlite:///{tmp_path}/old.db", f"sqlite:///{tmp_path}/new.db"
    setup_ledger(old)
    wins = _run_fleet(old, new, broken=True, steps=STEPS[:2])
    twice = [rid for rid, n in wins.items() if n > 1]
    assert twice, "the broken bridge went unnoticed"
    # Deterministic: an id spent on the old store in step 0 wins again in step 1.
    assert any(rid.startswith("s0-") for rid in twice)


# -- one process: the rules the fleet relies on ------------------------------------------


def _pair(tmp_path: Path) -> tuple[SQLiteLedger, SQLiteLedger]:
    return SQLiteLedger(tmp_path / "old.db"), SQLiteLedger(tmp_path / "new.db")


def test_store_ids_and_h5_across_the_switch(tmp_path: Path) -> None:
    old, new = _pair(tmp_path)
    minted_old = mint(old, "asked-on-old")
    phase1 = Bridge(old, new, answer_as="old")
    assert phase1.store_id == old.store_id
    # Minted on an old-only host, answered on a phase-1 bridge: it resolves (H5).
    assert resolve(phase1, minted_old, approved=True).verdict is ResolveVerdict.RUN
    assert old.is_spent("asked-on-old")
    assert new.is_spent("asked-on-old")
    minted_bridge = mint(phase1, "asked-on-bridge")
    # ... and an old-only host can resolve what the bridge minted (same store_id).
    assert resolve(old, minted_bridge, approved=True).verdict is ResolveVerdict.RUN
    assert resolve(phase1, minted_bridge, approved=True).verdict is ResolveVerdict.ALREADY_SPENT

    migrate(old, new)
    phase2 = Bridge(old, new, answer_as="new")
    assert phase2.store_id == new.store_id
    pending = mint(phase1, "straddles-the-flip")
    # Minted under the old id, answered under the new one: asked again.
    assert resolve(phase2, pending, approved=True).verdict is ResolveVerdict.LEDGER_CHANGED
    again = mint(phase2, "straddles-the-flip")
    assert (
        resolve(new, again, approved=True).verdict is ResolveVerdict.RUN
    )  # new-only hosts resolve it
    assert resolve(phase2, again, approved=True).verdict is ResolveVerdict.ALREADY_SPENT


def test_a_bridge_proves_a_close_for_both_stores(tmp_path: Path) -> None:
    old, new = _pair(tmp_path)
    bridge = Bridge(old, new, answer_as="old")
    pending = mint(old, "timed-out")
    closure = close_pause(bridge, pending)
    assert closure.verdict is CloseVerdict.CLOSED_PROVEN
    assert closure.recorded
    # A late answer on an old-only host is told the host closed it; never RUN.
    assert resolve(old, pending, approved=True).verdict is ResolveVerdict.CLOSED_BY_HOST
    assert new.is_spent("timed-out")  # and the new store will never run it


def test_old_only_hosts_win_ids_the_bridge_reached_second(tmp_path: Path) -> None:
    old, new = _pair(tmp_path)
    bridge = Bridge(old, new, answer_as="old")
    assert old.spend("ran-on-old") is True
    assert bridge.spend("ran-on-old") is False  # spent in the old store: not again
    assert bridge.is_spent("ran-on-old") is True
    assert new.spend("bridge-crashed-between") is True  # a bridge won the new store, died
    assert bridge.spend("bridge-crashed-between") is False
    assert bridge.is_spent("bridge-crashed-between") is True


def test_a_failure_after_the_new_store_recorded_counts_as_spent(tmp_path: Path) -> None:
    old, new = _pair(tmp_path)
    bridge = Bridge(old, new, answer_as="old")
    old.close()  # the old store fails after the new one recorded the id
    with pytest.raises(AmbiguousSpend, match="treat it as spent"):
        bridge.spend("half")
    assert new.is_spent("half") is True
    # H2 asks is_spent: the new store holds it, so the pause counts as spent.
    assert spend_landed(bridge, "half") is LandedVerdict.COUNTS_AS_SPENT
    with pytest.raises(LedgerError):
        bridge.is_spent("never")  # not in new, and the old store cannot answer: raise


def test_a_bridge_refuses_what_it_cannot_bridge(tmp_path: Path) -> None:
    old, new = _pair(tmp_path)
    with pytest.raises(MigrationError, match="same store"):
        Bridge(old, SQLiteLedger(tmp_path / "old.db"), answer_as="old")
    with pytest.raises(MigrationError, match="store_id"):
        Bridge(MemoryLedger(), new, answer_as="old")
    with pytest.raises(ValueError):
        Bridge(old, new, answer_as="both")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="AsyncBridge"):
        Bridge(old, AsyncMemoryLedger(), answer_as="old")
    new.spend("someone-else")  # the new store already serves another ledger: no merge
    with pytest.raises(MigrationError, match="merge"):
        Bridge(old, new, answer_as="old")


def test_phase_1_hosts_restarting_after_the_copy_do_not_reopen_the_migration(
    tmp_path: Path,
) -> None:
    old, new = _pair(tmp_path)
    Bridge(old, new, answer_as="old").spend("a")
    assert migration_state(new) is not None
    migrate(old, new)
    assert migration_state(new) is None
    Bridge(old, new, answer_as="old")  # a phase-1 host restarts after the copy
    assert migration_state(new) is None
    assert store_id_of(open_ledger(f"sqlite:///{tmp_path}/new.db")) == new.store_id


def test_the_async_bridge_decides_as_the_sync_one(tmp_path: Path) -> None:
    async def scenario() -> None:
        old: Any = await open_async_ledger(f"sqlite:///{tmp_path}/old.db")
        new: Any = await open_async_ledger(f"sqlite:///{tmp_path}/new.db", allow_incomplete=True)
        assert await old.spend("ran-on-old") is True
        bridge = await AsyncBridge.open(old, new, answer_as="old")
        assert bridge.store_id == old.store_id
        assert await bridge.spend("ran-on-old") is False
        assert await bridge.spend("x") is True
        assert await bridge.spend("x") is False
        assert await bridge.is_spent("ran-on-old") is True
        assert await bridge.is_spent("y") is False
        with pytest.raises(IncompleteMigration):
            await AsyncBridge.open(old, new, answer_as="new")
        await old.aclose()
        with pytest.raises(LedgerUnavailable):
            await bridge.spend("half")
        assert await new.is_spent("half") is True

    asyncio.run(scenario())
