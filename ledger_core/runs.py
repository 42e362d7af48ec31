"""Migration runs as a store records them, and the check every opening makes: a store
whose copy was never verified may lack ids spent in the old one, so opening it is refused
(:class:`IncompleteMigration`). Opening depends on this check, never on the copy tool.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from .errors import LedgerError, UnsafeStoreConfig
from .ids import MarkerKind, marker_id
from .protocol import describe, store_id_of
from .steps import Steps, run_steps, run_steps_async


class MigrationError(LedgerError):
    """The copy could not be completed or verified; the target must not be used yet."""


def started_marker(run: int) -> bytes:
    return marker_id(MarkerKind.MIGRATION_STARTED, str(run))


def done_marker(run: int) -> bytes:
    return marker_id(MarkerKind.MIGRATION_DONE, str(run))


def catch_up_marker(run: int) -> bytes:
    return marker_id(MarkerKind.MIGRATION_CATCH_UP, str(run))


# The marker bookkeeping is written once as steps: ``(method, marker)`` asked of the
# target, so a migration, a sync or async open and the bridge all decide the same way.
MarkerStep = tuple[str, bytes | None]
READ, SPEND, HOLDS_IDS = "is_marker_spent", "spend_marker", "holds_ids"
MAX_RUNS = 10_000  # a store migrated into more often than this is not a migration target


@dataclass(frozen=True)
class OpenRun:
    """A run started and never verified; ``catch_up``: into a store already in service."""

    run: int
    catch_up: bool


@dataclass(frozen=True)
class RunState:
    """Every migration run recorded in a store (``run == 0``: never migrated into)."""

    run: int  # the highest run started
    open_runs: tuple[OpenRun, ...] = ()

    @property
    def unfinished(self) -> bool:
        return bool(self.open_runs)

    @property
    def blocks_opening(self) -> bool:
        """A copy never verified, from any source: ids of that source may be missing, so
        a ledger on this store could answer ``True`` for an id spent in the old one."""
        return any(not r.catch_up for r in self.open_runs)

    def describe(self) -> str | None:
        if not self.unfinished:
            return None
        runs = ", ".join(
            f"{'catch-up run' if r.catch_up else 'run'} {r.run}" for r in self.open_runs
        )
        return f"incomplete migration ({runs} started and never verified)"


def last_run_steps() -> Steps[MarkerStep, int]:
    """The highest run number started in the store (0: none)."""
    run = 0
    while run < MAX_RUNS and (yield (READ, started_marker(run + 1))):
        run += 1
    return run


def run_state_steps() -> Steps[MarkerStep, RunState]:
    """Every run, not only the last: one left unfinished under a later, finished one
    (a ``--merge`` from another source) still lacks ids."""
    last = yield from last_run_steps()
    open_runs: list[OpenRun] = []
    for run in range(1, last + 1):
        if not (yield (READ, done_marker(run))):
            open_runs.append(OpenRun(run, bool((yield (READ, catch_up_marker(run))))))
    return RunState(last, tuple(open_runs))


def has_markers(ledger: object) -> bool:
    """Whether the ledger has a marker space (``spend_marker`` and ``is_marker_spent``)."""
    return callable(getattr(ledger, SPEND, None)) and callable(getattr(ledger, READ, None))


def _marker_answer(answer: object, method: str) -> bool:
    if type(answer) is not bool:
        raise MigrationError(f"{method} answered {answer!r}, not a bool")
    return answer


def marker_performer(ledger: object) -> Callable[[MarkerStep], bool]:
    """Run one marker step on a sync ledger."""

    def perform(step: MarkerStep) -> bool:
        method, marker = step
        if method == HOLDS_IDS:
            return holds_ids(ledger)
        return _marker_answer(getattr(ledger, method)(marker), method)

    return perform


def async_marker_performer(ledger: object) -> Callable[[MarkerStep], Awaitable[bool]]:
    """Run one marker step on an async ledger (a sync one is called as is)."""

    async def perform(step: MarkerStep) -> bool:
        method, marker = step
        if method == HOLDS_IDS:
            return await holds_ids_async(ledger)
        answer = getattr(ledger, method)(marker)
        if inspect.isawaitable(answer):
            answer = await answer
        return _marker_answer(answer, method)

    return perform


def run_state(ledger: object) -> RunState:
    """Every migration run recorded in a sync ledger (a ledger without markers:
    never migrated into, as far as it can say)."""
    if not has_markers(ledger):
        return RunState(0)
    return run_steps(run_state_steps(), marker_performer(ledger))


def opening_steps(ledger: object, where: str | None) -> Steps[MarkerStep, None]:
    """What opening a store checks: refuse one while a copy into it is unverified.

    A ledger that never proves whose store refuses even this read as unsafe (a Redis
    replica refuses every script) still opens: every spend and read of it refuses the
    same way. Any other failure refuses the opening."""
    try:
        state = yield from run_state_steps()
    except UnsafeStoreConfig:
        if store_id_of(ledger) is not None:
            raise
        return
    refuse_incomplete(state, where or location_of(ledger))


def location_of(ledger: object) -> str:
    info = describe(ledger)
    return info.location or info.backend or type(ledger).__name__


def check_opening(ledger: object, where: str | None = None) -> None:
    """:func:`opening_steps` on a sync ledger (one without markers is not checked)."""
    if has_markers(ledger):
        run_steps(opening_steps(ledger, where), marker_performer(ledger))


async def check_opening_async(ledger: object, where: str | None = None) -> None:
    if has_markers(ledger):
        await run_steps_async(opening_steps(ledger, where), async_marker_performer(ledger))


def allow_incomplete(ledger: object) -> None:
    """Let ``ledger`` answer although a migration into its store is unfinished: the
    migration's own target, and the tools that report on it (``LedgerBase`` checks
    before its first answer otherwise)."""
    if hasattr(type(ledger), "_cleared"):
        ledger._cleared = True  # type: ignore[attr-defined]


class IncompleteMigration(MigrationError):
    """The store is the target of a migration that never finished: a ledger opened on it
    could answer ``True`` for an id spent in the old store and not copied yet."""


def refuse_incomplete(state: RunState, where: str) -> None:
    """Raise :class:`IncompleteMigration` when ``state`` forbids opening the store."""
    if state.blocks_opening:
        raise IncompleteMigration(
            f"{where}: {state.describe()}; finish it (`decision-ledger lineage` names each "
            "run's source; run that `decision-ledger migrate OLD NEW` again) before any host "
            "uses this store (the migration itself opens it with allow_incomplete=True)"
        )


def holds_ids(target: object) -> bool:
    """Whether the target has any spent id; a target that cannot list can't tell."""
    listing = getattr(target, "spent_ids", None)
    if not callable(listing):
        raise MigrationError(
            f"{type(target).__name__} cannot list its ids, so a merge can't be ruled out: "
            "pass --merge / merge=True if that is what you want"
        )
    return next(iter(listing()), None) is not None


async def holds_ids_async(target: object) -> bool:
    """:func:`holds_ids` for an async ledger (an async iterator, or a sync one)."""
    listing = getattr(target, "spent_ids", None)
    if not callable(listing):
        return holds_ids(target)  # raises the same refusal
    ids = listing()
    if hasattr(ids, "__anext__"):
        try:
            await ids.__anext__()
        except StopAsyncIteration:
            return False
        finally:
            closing = getattr(ids, "aclose", None)
            if callable(closing):
                await closing()
        return True
    return next(iter(ids), None) is not None
