"""Operation histories and a per-key linearizability checker (Jepsen/Porcupine style).

Each key is an independent register: ``spent`` starts ``False``, ``spend`` flips it and
returns ``True`` (``False`` if already set), ``is_spent`` returns it. A raised spend may
take effect at any instant after its invoke or never; a raised read has no effect.

With ``T`` the winning spend, *before-ops* the reads that saw ``False`` and *after-ops*
the losing spends and the reads that saw ``True``, a linearization exists iff
``max(T.invoke, before.invoke) < min(T.complete, after.complete)``. Without a winner the
flip comes from the earliest raised spend ``R``:
``max(R.invoke, before.invoke) < min(after.complete)``. ``x`` precedes ``y`` when
``x.complete_ns <= y.invoke_ns``.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, cast, get_args

__all__ = ["FINAL", "History", "Op", "OpKind", "Violation", "check", "format_violations"]

OpKind = Literal["spend", "is_spent"]
_KINDS: tuple[str, ...] = get_args(OpKind)

FINAL = "final"
"""The process name of the end-of-run "still spent?" reads; a stale one is a C2 loss."""

T = TypeVar("T")


@dataclass(frozen=True)
class Op:
    """One call: who made it, on which key, when, and what came back."""

    process: str
    kind: OpKind
    key: str
    invoke_ns: int
    complete_ns: int
    result: object
    error: str | None

    @property
    def ok(self) -> bool:
        """Whether the call returned (a raised call is indeterminate)."""
        return self.error is None

    def describe(self) -> str:
        outcome = f"raised {self.error}" if self.error is not None else f"-> {self.result!r}"
        return (
            f"{self.process}: {self.kind}({self.key!r}) {outcome} "
            f"[{self.invoke_ns}, {self.complete_ns}]"
        )


def error_text(exc: BaseException) -> str:
    """One line, whole: a driver's multi-line message (a connection error with a hint
    line) joined, not cut."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {' | '.join(lines)}" if lines else type(exc).__name__


@dataclass
class Recording:
    """One call being timed, for sync and async callers alike: enter just before the call
    and set :attr:`value` after it; on the way out the op goes to ``sink``, as raised when
    an exception of type ``catch`` leaves the block (which then goes on), not at all for
    any other exception."""

    sink: Callable[[Op], None]
    process: str
    kind: OpKind
    key: str
    catch: type[BaseException] = BaseException
    value: object = None
    invoke_ns: int = 0

    def __enter__(self) -> Recording:
        self.invoke_ns = time.monotonic_ns()
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        if exc is not None and not isinstance(exc, self.catch):
            return
        value, error = (self.value, None) if exc is None else (None, error_text(exc))
        complete = time.monotonic_ns()
        self.sink(Op(self.process, self.kind, self.key, self.invoke_ns, complete, value, error))


class History:
    """A thread-safe list of ops; one per test, shared by every worker that records into it."""

    def __init__(self, ops: Iterable[Op] = ()) -> None:
        self._lock = threading.Lock()
        self._ops: list[Op] = list(ops)

    def record(self, process: str, kind: OpKind, key: str, call: Callable[[], T]) -> T:
        """Run ``call``, append its op, and return its value or re-raise its exception."""
        with Recording(self.add, process, kind, key) as recording:
            recording.value = call()
        return recording.value

    async def record_async(
        self, process: str, kind: OpKind, key: str, call: Callable[[], Awaitable[T]]
    ) -> T:
        """The async form of :meth:`record` (a cancelled call is recorded as raised)."""
        with Recording(self.add, process, kind, key) as recording:
            recording.value = await call()
        return recording.value

    def add(self, op: Op) -> None:
        with self._lock:
            self._ops.append(op)

    def extend(self, ops: Iterable[Op]) -> None:
        batch = list(ops)
        with self._lock:
            self._ops.extend(batch)

    @property
    def ops(self) -> list[Op]:
        """A copy, so checking never races further recording."""
        with self._lock:
            return list(self._ops)

    def __len__(self) -> int:
        with self._lock:
            return len(self._ops)

    def to_json(self) -> list[dict[str, Any]]:
        """Plain dicts, to ship ops from child processes (CLOCK_MONOTONIC is system-wide)."""
        return [_op_to_json(op) for op in self.ops]

    @classmethod
    def from_json(cls, data: Iterable[Mapping[str, Any]]) -> History:
        return cls(_op_from_json(item) for item in data)


def jsonable(result: object) -> object:
    """A call's result as JSON carries it: anything else as its ``repr`` (still not a
    bool, so still a violation when checked)."""
    return result if result is None or isinstance(result, (bool, int, float, str)) else repr(result)


def _op_to_json(op: Op) -> dict[str, Any]:
    return {**vars(op), "result": jsonable(op.result)}


def _op_from_json(item: Mapping[str, Any]) -> Op:
    kind = item["kind"]
    if kind not in _KINDS:
        raise ValueError(f"unknown op kind {kind!r}")
    invoke, complete = item["invoke_ns"], item["complete_ns"]
    if not isinstance(invoke, int) or not isinstance(complete, int) or complete < invoke:
        raise ValueError(f"bad op times {invoke!r}..{complete!r}")
    error = item.get("error")
    return Op(
        process=str(item["process"]),
        kind=cast(OpKind, kind),
        key=str(item["key"]),
        invoke_ns=invoke,
        complete_ns=complete,
        result=item.get("result"),
        error=None if error is None else str(error),
    )


@dataclass(frozen=True)
class Violation:
    """A clause broken on one key, with the ops that prove it."""

    clause: str
    key: str
    message: str
    ops: tuple[Op, ...]

    def __str__(self) -> str:
        lines = [f"{self.clause} on {self.key!r}: {self.message}"]
        lines.extend(f"    {op.describe()}" for op in self.ops)
        return "\n".join(lines)


def format_violations(violations: Iterable[Violation], *, limit: int = 20) -> str:
    """A readable block for an assertion message (the first ``limit`` violations)."""
    found = list(violations)
    text = "\n".join(str(v) for v in found[:limit])
    if len(found) > limit:
        text += f"\n... and {len(found) - limit} more"
    return text


def check(ops: History | Iterable[Op]) -> list[Violation]:
    """Every violation found, key by key; an empty list means the history is linearizable."""
    by_key: dict[str, list[Op]] = defaultdict(list)
    for op in ops.ops if isinstance(ops, History) else ops:
        by_key[op.key].append(op)
    violations: list[Violation] = []
    for key in sorted(by_key):
        violations.extend(_check_key(key, by_key[key]))
    return violations


def _check_key(key: str, ops: list[Op]) -> list[Violation]:
    found: list[Violation] = []
    winners: list[Op] = []
    raised_spends: list[Op] = []
    before: list[Op] = []  # reads that saw False: they sit before the flip
    after: list[Op] = []  # spends that lost and reads that saw True: after the flip
    for op in ops:
        if op.error is not None:
            if op.kind == "spend":
                raised_spends.append(op)
            continue
        if not isinstance(op.result, bool):
            # A non-bool answer is broken on its own; for the rest of the check the
            # spend is indeterminate (it may have recorded) and the read says nothing.
            clause = "C1" if op.kind == "spend" else "C3"
            found.append(
                Violation(clause, key, f"{op.kind} returned {op.result!r}, not a bool", (op,))
            )
            if op.kind == "spend":
                raised_spends.append(op)
            continue
        if op.kind == "spend":
            (winners if op.result else after).append(op)
        else:
            (after if op.result else before).append(op)

    if len(winners) > 1:
        found.append(
            Violation(
                "C1",
                key,
                f"{len(winners)} spends returned True for one id; exactly one may",
                tuple(winners),
            )
        )
        return found

    flip = winners[0] if winners else None
    if flip is None and raised_spends:
        flip = min(raised_spends, key=lambda op: op.invoke_ns)
    won = bool(winners)

    # After-ops that completed before any possible flip.
    for op in after:
        if flip is not None and flip.invoke_ns < op.complete_ns:
            continue
        found.append(_early_after(key, op, flip, won))

    # Before-ops that started after the flip had surely happened: after the winner
    # completed, or after some op that already saw (or lost to) the flip completed.
    first_after = min(after, key=lambda op: op.complete_ns, default=None)
    for op in before:
        if won and flip is not None and flip.complete_ns <= op.invoke_ns:
            found.append(_late_before(key, op, flip, "the spend that recorded it returned True"))
        elif first_after is not None and first_after.complete_ns <= op.invoke_ns:
            seen = "lost a spend" if first_after.kind == "spend" else "read it spent"
            found.append(_late_before(key, op, first_after, f"another call {seen}"))
    return found


def _early_after(key: str, op: Op, flip: Op | None, won: bool) -> Violation:
    what = "spend returned False" if op.kind == "spend" else "is_spent returned True"
    clause = "C1" if op.kind == "spend" else "C3"
    if flip is None:
        return Violation(clause, key, f"{what} but no spend could have recorded the id", (op,))
    if won:
        message = f"{what} and completed before the only spend that returned True was invoked"
    else:
        message = f"{what} and completed before any spend that could have recorded the id began"
    return Violation(clause, key, message, (op, flip))


def _late_before(key: str, op: Op, witness: Op, because: str) -> Violation:
    if op.process == FINAL:
        return Violation(
            "C2",
            key,
            f"the final read says not spent, but {because} before it: the record was lost",
            (witness, op),
        )
    return Violation(
        "C3", key, f"is_spent returned False after {because}: a stale read", (witness, op)
    )
