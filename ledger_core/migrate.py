"""Move a ledger to a new store without letting any spent id read as unspent there.

A new store is a new ``store_id`` (C6), so requests minted under the old one resolve as
``ledger-changed`` (H5) and are asked again. ``migrate`` copies every spent id into the
target in batches (``spend_many``/``is_spent_many`` when the target has them, one call
per id otherwise), verifies each one reads as spent there, and records the lineage (the
old ``store_id``) as a spent marker in the target.

Safe to interrupt: each run is numbered in the target by markers (``migration-started``
n, then ``migration-done`` n once every id is verified); until then the target reads as
an incomplete migration (:func:`migration_state`). A re-run resumes: ids the target
already holds are only read (batched), never written again. Resuming by a position in
the source would be wrong: ids spent in the old store meanwhile land anywhere in byte
order. A target that holds spends from elsewhere is refused unless ``merge=True``.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from .errors import LedgerError
from .ids import MarkerKind, marker_id
from .protocol import DecisionLedger, store_id_of

BATCH = 1000
MAX_RUNS = 10_000  # a store migrated into more often than this is not a migration target


@runtime_checkable
class ScannableLedger(Protocol):
    """A ledger that can list what it has spent: what a migration source must offer."""

    def spent_ids(self) -> Iterator[str]: ...


class MigrationError(LedgerError):
    """The copy could not be completed or verified; the target must not be used yet."""


@dataclass(frozen=True)
class MigrationReport:
    source_store_id: str | None
    target_store_id: str | None
    copied: int  # newly spent in the target by this run
    already_present: int  # spent in the target before (an earlier run, or a racing spend)
    verified: int  # read back as spent from the target
    lineage: str | None  # the source store_id recorded in the target (None: not recorded)
    run: int | None = None  # the run number in the target's markers (None: no markers)
    resumed: bool = False  # this run continued an interrupted one


@dataclass(frozen=True)
class Progress:
    """What a progress callback is told after each batch."""

    done: int  # ids handled so far (copied or already present, each verified)
    copied: int
    elapsed: float  # seconds since the copy started
    last_id: str | None  # the last id handled (sources list in byte order)
    total: int | None = None  # the source's count when the copy started, if counted

    @property
    def rate(self) -> float:
        return self.done / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def eta(self) -> float | None:
        """Seconds left at the current rate (``None``: no total, or no rate yet)."""
        if self.total is None or self.rate <= 0:
            return None
        return max(self.total - self.done, 0) / self.rate


class MigrationInterrupted(MigrationError):
    """The copy stopped before it finished (Ctrl-C); the target stays incomplete."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        super().__init__(
            f"interrupted after {progress.done} ids (last: {progress.last_id!r}); the "
            "target is marked as an incomplete migration: run the same command to resume"
        )


def lineage_marker(source_store_id: str) -> bytes:
    """The marker that records "this store continues ``source_store_id``".

    A marker, not an id: a request id can never collide with it, and listing the
    target's ids never shows it.
    """
    return marker_id(MarkerKind.LINEAGE, source_store_id)


def _started(run: int) -> bytes:
    return marker_id(MarkerKind.MIGRATION_STARTED, str(run))


def _done(run: int) -> bytes:
    return marker_id(MarkerKind.MIGRATION_DONE, str(run))


def _source(run: int, source_id: str) -> bytes:
    return marker_id(MarkerKind.MIGRATION_SOURCE, f"{run}\x00{source_id}")


class _Markers:
    """The target's marker calls, or nothing when it has no marker space."""

    def __init__(self, target: object) -> None:
        self.spend: Callable[[bytes], Any] | None = getattr(target, "spend_marker", None)
        self.read: Callable[[bytes], Any] | None = getattr(target, "is_marker_spent", None)

    @property
    def present(self) -> bool:
        return callable(self.spend) and callable(self.read)

    def is_spent(self, marker: bytes) -> bool:
        assert self.read is not None
        answer = self.read(marker)
        if type(answer) is not bool:
            raise MigrationError(f"is_marker_spent answered {answer!r}, not a bool")
        return answer

    def last_run(self) -> int:
        """The highest run number started in the target (0: none)."""
        run = 0
        while run < MAX_RUNS and self.is_spent(_started(run + 1)):
            run += 1
        return run


def migration_state(ledger: object) -> str | None:
    """``None`` if no migration into ``ledger`` is unfinished, else what is unfinished
    (a host must not switch to a store whose copy was never verified)."""
    markers = _Markers(ledger)
    if not markers.present:
        return None
    run = markers.last_run()
    if run == 0 or markers.is_spent(_done(run)):
        return None
    return f"incomplete migration (run {run} started and was never verified)"


def migrate(
    source: DecisionLedger,
    target: DecisionLedger,
    *,
    merge: bool = False,
    progress: Callable[[Progress], object] | None = None,
    batch: int = BATCH,
    total: int | None = None,
) -> MigrationReport:
    """Copy every spent id from ``source`` into ``target``, verify, record the lineage.

    ``progress`` is called after every batch (with ``total``, if given, for an ETA; see
    :func:`count_ids`). ``merge``: allow a target that already holds spends that no
    migration from ``source`` put there.
    """
    if not isinstance(source, ScannableLedger):
        raise MigrationError(f"{type(source).__name__} cannot list its spent ids (spent_ids)")
    is_spent = getattr(target, "is_spent", None)
    if not callable(is_spent):
        raise MigrationError(f"{type(target).__name__} has no is_spent: the copy can't be verified")
    source_id, target_id = store_id_of(source), store_id_of(target)
    if target_id is not None and target_id == source_id:
        raise MigrationError("source and target are the same store (equal store_id)")

    markers = _Markers(target)
    run, resumed = _begin(markers, target, source_id, merge)
    copied = already = 0
    last: str | None = None
    start = time.monotonic()
    spend_many = _batched(target, "spend_many", "spend")
    read_many = _batched(target, "is_spent_many", "is_spent")
    ids = iter(source.spent_ids())  # streamed: memory stays flat for any size
    try:
        while chunk := list(itertools.islice(ids, batch)):
            present = read_many(chunk)  # a resume reads what it has, and writes the rest
            missing = [rid for rid, there in zip(chunk, present, strict=True) if not there]
            won = spend_many(missing) if missing else []
            copied += sum(won)
            already += len(chunk) - sum(won)
            if missing and not all(read_many(missing)):
                bad = [rid for rid, ok in zip(missing, read_many(missing), strict=True) if not ok]
                raise MigrationError(f"id {bad[0]!r} does not read as spent in the target")
            last = chunk[-1]
            if progress is not None:
                elapsed = time.monotonic() - start
                progress(Progress(copied + already, copied, elapsed, last, total))
    except KeyboardInterrupt:
        done = Progress(copied + already, copied, time.monotonic() - start, last, total)
        raise MigrationInterrupted(done) from None
    lineage = _record_lineage(markers, source_id)
    if run is not None:
        markers.spend(_done(run))  # type: ignore[misc]
        if not markers.is_spent(_done(run)):
            raise MigrationError("the run's done marker does not read as spent in the target")
    total = copied + already
    return MigrationReport(source_id, target_id, copied, already, total, lineage, run, resumed)


def count_ids(source: object) -> int:
    """How many ids the source lists now (one streamed pass: for a progress ETA)."""
    if not isinstance(source, ScannableLedger):
        raise MigrationError(f"{type(source).__name__} cannot list its spent ids (spent_ids)")
    return sum(1 for _ in source.spent_ids())


def _begin(
    markers: _Markers, target: object, source_id: str | None, merge: bool
) -> tuple[int | None, bool]:
    """Number this run in the target (resume an interrupted run from the same source);
    refuse a target holding spends from elsewhere unless ``merge``."""
    subject = source_id or ""
    if not markers.present:
        if not merge and _holds_ids(target):
            raise MigrationError(_MERGE_REFUSAL)
        return None, False
    last = markers.last_run()
    if last and not markers.is_spent(_done(last)) and markers.is_spent(_source(last, subject)):
        return last, True  # our own interrupted run: resume it
    continues = source_id is not None and markers.is_spent(lineage_marker(source_id))
    if not (merge or continues) and _holds_ids(target):
        raise MigrationError(_MERGE_REFUSAL)
    run = last + 1
    while not markers.spend(_started(run)):  # type: ignore[misc]
        run += 1  # another migration took this number first
        if run > MAX_RUNS:
            raise MigrationError("too many migration runs recorded in the target")
    markers.spend(_source(run, subject))  # type: ignore[misc]
    return run, False


_MERGE_REFUSAL = (
    "the target already holds spent ids that no migration from this source put there; "
    "refusing to merge two ledgers silently (pass --merge / merge=True to merge)"
)


def _holds_ids(target: object) -> bool:
    """Whether the target has any spent id; a target that cannot list can't tell."""
    listing = getattr(target, "spent_ids", None)
    if not callable(listing):
        raise MigrationError(
            f"{type(target).__name__} cannot list its ids, so a merge can't be ruled out: "
            "pass --merge / merge=True if that is what you want"
        )
    return next(iter(listing()), None) is not None


def _batched(target: object, many: str, one: str) -> Callable[[Sequence[str]], list[bool]]:
    """The target's batch call, or its per-id call in a loop; every answer a bool."""
    call_many = getattr(target, many, None)
    call_one = getattr(target, one)

    def run(ids: Sequence[str]) -> list[bool]:
        answers = list(call_many(ids)) if callable(call_many) else [call_one(i) for i in ids]
        if len(answers) != len(ids) or any(type(a) is not bool for a in answers):
            raise MigrationError(f"target answered {answers[:3]!r}... to {many}: not bools")
        return answers

    return run


def _record_lineage(markers: _Markers, source_id: str | None) -> str | None:
    """Spend the lineage marker in the target, where it has a marker space."""
    if source_id is None or not markers.present:
        return None
    marker = lineage_marker(source_id)
    markers.spend(marker)  # type: ignore[misc]
    if not markers.is_spent(marker):
        raise MigrationError("the lineage marker does not read as spent in the target")
    return source_id
