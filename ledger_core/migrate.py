"""Move a ledger to a new store without letting any spent id read as unspent there.

A new store is a new ``store_id`` (C6): requests minted under the old one are asked again
(H5). ``migrate`` copies every spent id in batches, verifies each reads as spent in the
target, and records the lineage (the old ``store_id``) as a marker there.

Safe to interrupt: each run is numbered in the target by markers (``migration-started``
n, ``migration-done`` n once verified); until then ``open_ledger`` refuses the target
(:class:`IncompleteMigration`): it may lack ids spent in the old store. A catch-up run
into a store that already continues its source does not take it out of service. A
re-run resumes by reading what the target holds, never by a position in the source (ids
spent meanwhile land anywhere in byte order). A target holding spends from elsewhere is
refused unless ``merge=True``.
"""

from __future__ import annotations

import itertools
import re
import secrets
import shlex
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .ids import MarkerKind, marker_id
from .protocol import DecisionLedger, store_id_of
from .runs import (
    HOLDS_IDS,
    MAX_RUNS,
    READ,
    SPEND,
    MarkerStep,
    RunState,
    allow_incomplete,
    catch_up_marker,
    done_marker,
    has_markers,
    holds_ids,
    location_of,
    marker_performer,
    run_state,
    run_state_steps,
    started_marker,
)
from .runs import IncompleteMigration as IncompleteMigration
from .runs import MigrationError as MigrationError
from .steps import Steps, run_steps

BATCH = 1000


@runtime_checkable
class ScannableLedger(Protocol):
    """A ledger that can list what it has spent: what a migration source must offer."""

    def spent_ids(self) -> Iterator[str]: ...


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
    """The copy stopped (Ctrl-C); the target stays incomplete. ``resume``: the nonce to
    pass back when the source never proves (``None``: its store_id names the run)."""

    def __init__(self, progress: Progress, resume: str | None = None) -> None:
        self.progress = progress
        self.resume = resume
        last = "" if progress.last_id is None else f" (last: {progress.last_id!r})"
        super().__init__(
            f"interrupted after {progress.done} ids{last}; the target is marked as an "
            "incomplete migration: run the same command to resume"
        )


def lineage_marker(source_store_id: str) -> bytes:
    """The marker that records "this store continues ``source_store_id``"."""
    return marker_id(MarkerKind.LINEAGE, source_store_id)


def _source(run: int, subject: str) -> bytes:
    return marker_id(MarkerKind.MIGRATION_SOURCE, f"{run}\x00{subject}")


def _note_bit(run: int, bit: int | str) -> bytes:
    return marker_id(MarkerKind.MIGRATION_NOTE, f"{run}\x00{bit}")


_NONCE = re.compile(r"[0-9a-f]{12}")
NOTE_BYTES = 160  # a note's location is cut there (its length is spelled in one byte)


@dataclass(frozen=True)
class Note:
    """Who started a run: the source's redacted location, the nonce that names a source
    that never proves (``""``: its store_id does), and when (Unix seconds)."""

    where: str
    nonce: str
    started: int

    def encode(self) -> bytes:
        """Compact (each set bit is a marker write): location, NUL, nonce, 4-byte start."""
        where = self.where.encode()[:NOTE_BYTES].decode(errors="ignore").encode()
        nonce = bytes.fromhex(self.nonce) if self.nonce else b""
        return where + b"\x00" + nonce + (self.started & 0xFFFFFFFF).to_bytes(4, "big")

    @classmethod
    def decode(cls, raw: bytes) -> Note:
        where, _, rest = raw.partition(b"\x00")
        nonce, started = rest[:-4], rest[-4:]
        return cls(where.decode(errors="replace"), nonce.hex(), int.from_bytes(started, "big"))

    def describe(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.started))
        nonce = f" (run nonce {self.nonce})" if self.nonce else ""
        return f"{self.where}{nonce}, started {when}"

    def command(self, target: str) -> str:
        resume = f" --resume {self.nonce}" if self.nonce else ""
        return f"decision-ledger migrate {shlex.quote(self.where)} {target}{resume}"


def write_note_steps(run: int, note: Note) -> Steps[MarkerStep, None]:
    raw = note.encode()
    bits = len(raw).to_bytes(1, "big") + raw
    for i in range(len(bits) * 8):
        if bits[i // 8] >> (7 - i % 8) & 1:
            yield (SPEND, _note_bit(run, i))
    yield (SPEND, _note_bit(run, "end"))


def read_note_steps(run: int) -> Steps[MarkerStep, Note | None]:
    """Run ``run``'s note (``None``: not written, or not yet complete)."""
    if not (yield (READ, _note_bit(run, "end"))):
        return None
    values: list[int] = []  # the note's length, then its bytes
    while not values or len(values) < values[0] + 1:
        value = 0
        for i in range(len(values) * 8, len(values) * 8 + 8):
            value = value << 1 | bool((yield (READ, _note_bit(run, i))))
        values.append(value)
    return Note.decode(bytes(values[1:]))


def describe_runs_steps(state: RunState) -> Steps[MarkerStep, list[str]]:
    """``incomplete: run N from SOURCE, started ...`` for each unfinished run."""
    lines = []
    for r in state.open_runs:
        note = yield from read_note_steps(r.run)
        source = note.describe() if note else "a source not recorded"
        kind = "catch-up run" if r.catch_up else "run"
        lines.append(f"incomplete: {kind} {r.run} from {source}")
    return lines


class UnfinishedRun(MigrationError):
    """Another source's run into the target never finished: it must finish first (a
    later run, even a ``--merge``, must not make the target look complete)."""


def begin_run_steps(
    source_id: str | None,
    merge: bool,
    subject: str | None = None,
    note: Note | None = None,
    target: str = "NEW",
) -> Steps[MarkerStep, tuple[int, bool, tuple[int, ...]]]:
    """Number a run from ``subject`` (default: the source's store_id) in the target, or
    resume our unfinished ones; refuse while another source's run is unfinished, and a
    target holding spends from elsewhere unless ``merge``. ``(run, resumed, our runs)``."""
    subject = subject if subject is not None else source_id
    if not subject:
        raise MigrationError("a migration run needs a subject naming its source")
    state = yield from run_state_steps()
    ours: list[int] = []
    for r in state.open_runs:
        if (yield (READ, _source(r.run, subject))):
            ours.append(r.run)
            continue
        other = yield from read_note_steps(r.run)
        where = other.describe() if other else "a source not recorded"
        how = f"`{other.command(target)}`" if other else "the command that started it"
        raise UnfinishedRun(
            f"run {r.run} into the target, from {where}, never finished: finish it first "
            f"with {how}, then run this one again (no run, not even --merge, may make the "
            "target look complete while that source's ids may be missing)"
        )
    if ours:
        return ours[-1], True, tuple(ours)  # our own interrupted run(s), or a bridge's
    continues = source_id is not None and bool((yield (READ, lineage_marker(source_id))))
    if not (merge or continues) and (yield (HOLDS_IDS, None)):
        raise MigrationError(_MERGE_REFUSAL)
    run = state.run + 1
    while not (yield (SPEND, started_marker(run))):
        run += 1  # another migration took this number first
        if run > MAX_RUNS:
            raise MigrationError("too many migration runs recorded in the target")
    yield (SPEND, _source(run, subject))
    if continues:
        yield (SPEND, catch_up_marker(run))
    if note is not None:
        yield from write_note_steps(run, note)
    return run, False, (run,)


def unfinished_runs(ledger: object) -> list[str]:
    """One line per unfinished run into a sync ledger: its number, source and start."""
    if not has_markers(ledger):
        return []
    return run_steps(describe_runs_steps(run_state(ledger)), marker_performer(ledger))


def migration_state(ledger: object) -> str | None:
    """``None`` if no migration into ``ledger`` is unfinished, else what is unfinished
    (a host must not switch to a store whose copy was never verified)."""
    return run_state(ledger).describe()


@dataclass(frozen=True)
class Begun:
    """A run marked in the target (:func:`begin_run`), before any id is copied."""

    run: int | None  # None: the target has no marker space
    resumed: bool
    runs: tuple[int, ...]  # every run of this source the copy completes
    resume: str | None  # the nonce that names a source that never proves
    note: Note | None = None  # still to write (``write_note=False``), for a new run


def begin_run(
    source: object,
    target: object,
    *,
    merge: bool = False,
    resume: str | None = None,
    target_name: str = "NEW",
    write_note: bool = True,
) -> Begun:
    """Mark the target as migrating from ``source`` (or resume its unfinished run):
    from here it refuses to open until the copy is verified. ``resume``: the run nonce
    of a source that never proves; ``target_name``: how a refusal names the target;
    ``write_note=False`` leaves ``Begun.note`` to the caller (``migrate`` writes it
    beside the copy)."""
    if resume is not None and not _NONCE.fullmatch(resume):
        raise MigrationError(f"{resume!r} is not a run nonce (12 hex digits, as printed)")
    allow_incomplete(target)
    source_id = store_id_of(source)
    nonce = None if source_id is not None else (resume or secrets.token_hex(6))
    if not has_markers(target):
        if not merge and holds_ids(target):
            raise MigrationError(_MERGE_REFUSAL)
        return Begun(None, False, (), nonce)
    subject = source_id if nonce is None else f"{location_of(source)}#{nonce}"
    note = Note(location_of(source), nonce or "", int(time.time()))
    steps = begin_run_steps(source_id, merge, subject, note if write_note else None, target_name)
    run, resumed, runs = run_steps(steps, marker_performer(target))
    return Begun(run, resumed, runs, nonce, None if write_note or resumed else note)


class _NoteWriter(threading.Thread):
    """Writes a new run's note beside the copy: a marker spend per set bit (about 150)
    is seconds on a store that syncs each write. Only an unfinished run's note is ever
    read, so a finished copy stops it (``drop``)."""

    def __init__(self, target: object, run: int, note: Note) -> None:
        super().__init__(daemon=True, name="migration-note")
        self.steps, self.perform = write_note_steps(run, note), marker_performer(target)
        self.dropped = threading.Event()

    def run(self) -> None:
        try:
            for step in iter(self.steps):
                if self.dropped.is_set():
                    return
                self.perform(step)
        except Exception:  # the note is lost: the run reads "from a source not recorded"
            return

    def drop(self) -> None:
        self.dropped.set()
        self.join()  # at most the write in flight


def migrate(
    source: DecisionLedger,
    target: DecisionLedger,
    *,
    merge: bool = False,
    progress: Callable[[Progress], object] | None = None,
    batch: int = BATCH,
    total: int | None = None,
    resume: str | None = None,
    target_name: str = "NEW",
) -> MigrationReport:
    """Copy every spent id from ``source`` into ``target``, verify, record the lineage.

    ``progress`` is called after every batch (``total``: for an ETA, see :func:`count_ids`);
    ``merge``, ``resume``, ``target_name``: see :func:`begin_run`.
    """
    scannable = _scannable(source)
    is_spent = getattr(target, "is_spent", None)
    if not callable(is_spent):
        raise MigrationError(f"{type(target).__name__} has no is_spent: the copy can't be verified")
    source_id, target_id = store_id_of(source), store_id_of(target)
    if target_id is not None and target_id == source_id:
        raise MigrationError("source and target are the same store (equal store_id)")

    begun = begin_run(
        source, target, merge=merge, resume=resume, target_name=target_name, write_note=False
    )
    noting = None
    if begun.note is not None and begun.run is not None:
        noting = _NoteWriter(target, begun.run, begun.note)
        noting.start()
    try:
        report = _copy(scannable, target, begun, progress, batch, total)
    except BaseException:
        if noting is not None:
            # The copy's failure is the one said; the note (its source, for lineage and
            # refusals) is finished first, or reads as not recorded if it failed too.
            noting.join()
        raise
    if noting is not None:
        noting.drop()  # the run is about to be done: its note would never be read
    for run in begun.runs:
        _spend_verified(target, done_marker(run), "the run's done marker")
    return report


def _copy(
    source: ScannableLedger,
    target: object,
    begun: Begun,
    progress: Callable[[Progress], object] | None,
    batch: int,
    total: int | None,
) -> MigrationReport:
    """Every id of ``source`` into ``target``, verified, then the lineage marker."""
    source_id, target_id = store_id_of(source), store_id_of(target)
    copied = already = 0
    last: str | None = None
    start = time.monotonic()
    spend_many = _batched(target, "spend_many", "spend")
    read_many = _batched(target, "is_spent_many", "is_spent")
    ids = iter(source.spent_ids())  # streamed: memory stays flat for any size
    # A resume reads what the target has and writes only the rest; a new run writes
    # first (one round trip less per batch) until a batch finds ids already there.
    look_first = begun.resumed
    try:
        while chunk := list(itertools.islice(ids, batch)):
            present = read_many(chunk) if look_first else [False] * len(chunk)
            missing = [rid for rid, there in zip(chunk, present, strict=True) if not there]
            won = spend_many(missing) if missing else []
            copied += sum(won)
            already += len(chunk) - sum(won)
            look_first = look_first or sum(won) < len(missing)
            if missing and not all(read_many(missing)):
                bad = [rid for rid, ok in zip(missing, read_many(missing), strict=True) if not ok]
                raise MigrationError(f"id {bad[0]!r} does not read as spent in the target")
            last = chunk[-1]
            if progress is not None:
                elapsed = time.monotonic() - start
                progress(Progress(copied + already, copied, elapsed, last, total))
    except KeyboardInterrupt:
        done = Progress(copied + already, copied, time.monotonic() - start, last, total)
        raise MigrationInterrupted(done, begun.resume) from None
    lineage = source_id if begun.run is not None else None
    if lineage is not None:
        _spend_verified(target, lineage_marker(lineage), "the lineage marker")
    total = copied + already
    return MigrationReport(
        source_id, target_id, copied, already, total, lineage, begun.run, begun.resumed
    )


def count_ids(source: object) -> int:
    """How many ids the source lists now (one streamed pass: for a progress ETA)."""
    return sum(1 for _ in _scannable(source).spent_ids())


def _scannable(source: object) -> ScannableLedger:
    if not isinstance(source, ScannableLedger):
        raise MigrationError(f"{type(source).__name__} cannot list its spent ids (spent_ids)")
    return source


_MERGE_REFUSAL = (
    "the target already holds spent ids that no migration from this source put there; "
    "refusing to merge two ledgers silently (pass --merge / merge=True to merge)"
)


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


def _spend_verified(target: object, marker: bytes, what: str) -> None:
    perform = marker_performer(target)
    perform((SPEND, marker))
    if not perform((READ, marker)):
        raise MigrationError(f"{what} does not read as spent in the target")
