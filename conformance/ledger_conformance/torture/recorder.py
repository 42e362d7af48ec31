"""The operation journal: every call written down before it is made and after it ends.

Each worker process appends JSON lines to its own file: ``["I", seq, worker, kind, id,
invoke_ns]`` before the call (flushed, so a process killed mid-call still shows the call
it was in) and ``["C", seq, complete_ns, result, error]`` after it. The times are
``time.monotonic_ns()``, which is one clock for every process of the machine. An invoke
without a completion is an operation that never returned: indeterminate, like a raised
one, and open until the end of the campaign.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

from ledger_core.errors import LedgerError

from ..harness import error_text
from ..history import Op, OpKind, jsonable

NEVER_RETURNED = "never returned (its process was stopped)"
FOREIGN = "(not a LedgerError) "  # leads the error of a call that raised something else
KINDS: dict[str, OpKind] = {"s": "spend", "r": "is_spent"}
Kind = Literal["s", "r"]


def error_line(exc: BaseException, limit: int = 300) -> str:
    """The suite's one-line :func:`error_text`, marked when foreign, bounded."""
    text = error_text(exc)
    if not isinstance(exc, LedgerError):
        text = FOREIGN + text
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Journal:
    """One process's journal file; shared by its threads and tasks."""

    def __init__(self, path: Path) -> None:
        self._file: IO[str] = open(path, "a", encoding="utf-8")  # noqa: SIM115
        self._lock = threading.Lock()
        self._seq = itertools.count()

    def invoke(self, worker: str, kind: Kind, request_id: str, invoke_ns: int) -> int:
        seq = next(self._seq)
        line = json.dumps(["I", seq, worker, kind, request_id, invoke_ns]) + "\n"
        with self._lock:
            self._file.write(line)
            self._file.flush()  # on disk (the page cache) before the call can take effect
        return seq

    def complete(self, seq: int, complete_ns: int, result: object, error: str | None) -> None:
        line = json.dumps(["C", seq, complete_ns, jsonable(result), error]) + "\n"
        with self._lock:
            self._file.write(line)

    def close(self) -> None:
        with self._lock:
            self._file.close()


@dataclass(frozen=True)
class Loaded:
    """Every op of a campaign, and how many of its calls never returned."""

    ops: list[Op]
    never_returned: int


def _lines(path: Path) -> Iterator[list[object]]:
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            if line.endswith("\n"):  # a line cut by a killed process is not an op
                yield json.loads(line)


def load(paths: Iterable[Path], end_ns: int) -> Loaded:
    """Merge the journals; a call that never returned is open until ``end_ns``."""
    ops: list[Op] = []
    open_calls = 0
    for path in paths:
        invoked: dict[int, tuple[str, OpKind, str, int]] = {}
        for item in _lines(path):
            if item[0] == "I":
                _, seq, worker, kind, request_id, invoke = item
                assert isinstance(seq, int)
                assert isinstance(invoke, int)
                invoked[seq] = (str(worker), KINDS[str(kind)], str(request_id), invoke)
            else:
                _, seq, complete, result, error = item
                assert isinstance(seq, int)
                assert isinstance(complete, int)
                worker, op_kind, request_id, invoke = invoked.pop(seq)
                text = None if error is None else str(error)
                ops.append(Op(worker, op_kind, request_id, invoke, complete, result, text))
        for worker, op_kind, request_id, invoke in invoked.values():
            open_calls += 1
            ops.append(
                Op(worker, op_kind, request_id, invoke, max(end_ns, invoke), None, NEVER_RETURNED)
            )
    return Loaded(ops, open_calls)
