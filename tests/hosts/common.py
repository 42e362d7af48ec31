"""What the agent-host tests share: a tool that logs each run, and OS processes released
together (spawned, so each opens its own ledger and framework state from the files)."""

from __future__ import annotations

import multiprocessing as mp
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ledger_agents import RECOVERY

CTX = mp.get_context("spawn")
CRASH_EXIT = 17
REFUSED = (
    "Not run: this approval was already answered (approved or denied) by another resume." + RECOVERY
)
ALREADY = f"error NotThisResume: {REFUSED}"


def log_line(log: Path, line: str) -> None:
    """Append one line atomically (O_APPEND), so racing processes never interleave."""
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def ledger_url(root: Path) -> str:
    """The store a test's processes share: ``root/ledger.url`` when the test names one
    (another backend), else a SQLite file in ``root``."""
    named = root / "ledger.url"
    return named.read_text() if named.exists() else f"sqlite:///{root / 'ledger.db'}"


def lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def tool(log: Path, crash: bool) -> str:
    """The guarded tool: logs its start; ``crash`` kills the process before it finishes."""
    log_line(log, "start")
    if crash:
        os._exit(CRASH_EXIT)  # a real crash: no cleanup, no exception handlers
    log_line(log, "done")
    return "sent"


def _run(target: Callable[..., object], barrier: Any, queue: Any, args: tuple[Any, ...]) -> None:
    if barrier is not None:
        barrier.wait()
    try:
        queue.put(str(target(*args)))
    except Exception as exc:  # reported to the parent, which asserts on it
        queue.put(f"error {type(exc).__name__}: {exc}")


def in_processes(
    target: Callable[..., object], arg_sets: list[tuple[Any, ...]], *, together: bool = True
) -> tuple[list[str], list[int | None]]:
    """Run ``target(*args)`` in one spawned process per arg set, released by one barrier.

    Returns the results (strings, sorted) and the exit codes."""
    barrier = CTX.Barrier(len(arg_sets)) if together else None
    queue = CTX.Queue()
    procs = [CTX.Process(target=_run, args=(target, barrier, queue, a)) for a in arg_sets]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    codes = [p.exitcode for p in procs]
    results = []
    while not queue.empty():
        results.append(queue.get())
    return sorted(results), codes


def _run_rounds(
    target: Callable[..., object], barrier: Any, queue: Any, arg_sets: list[tuple[Any, ...]]
) -> None:
    for args in arg_sets:
        _run(target, barrier, queue, args)


def in_rounds(
    target: Callable[..., object], rounds: list[list[tuple[Any, ...]]]
) -> tuple[list[str], list[int | None]]:
    """Race one spawned process per arg set of a round, round after round: worker ``k``
    runs ``rounds[r][k]`` for every ``r``, and one barrier releases all workers at the
    start of each round (so many races pay each worker's imports once).

    Returns every result (strings, sorted) and the exit codes."""
    workers = len(rounds[0])
    barrier = CTX.Barrier(workers, timeout=120)
    queue = CTX.Queue()
    procs = [
        CTX.Process(target=_run_rounds, args=(target, barrier, queue, [r[k] for r in rounds]))
        for k in range(workers)
    ]
    for p in procs:
        p.start()
    # Drained before the joins: a worker cannot exit while its queue's pipe is full.
    results = [str(queue.get(timeout=120)) for _ in range(workers * len(rounds))]
    for p in procs:
        p.join(120)
    return sorted(results), [p.exitcode for p in procs]
