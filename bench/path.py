"""``python -m bench.path``: how far one warm call travels before it reaches its driver.

A newcomer should be able to read a spend top-down, from the public method to the driver
call, in a few functions. This traces one warm ``spend`` of a new id, one of a spent id and
one ``is_spent``, sync and async, on every store with a server here (the bench's own
servers), and prints per call:

- ``depth``: the project frames on the stack when the first driver function is entered
  (a generator or coroutine counts once, as a reader passes through it once; for a ledger
  that hands its statement to a worker thread, the worker's frames only);
- ``before``: the distinct project functions entered before that first driver call;
- ``functions`` / ``files``: the distinct project functions the whole call ran, and the
  project files they live in;
- ``switches``: how often consecutive project calls change file.

"Project" is code under ``ledger_core/`` and ``backends/``; "driver" is the store's client
library (``DRIVERS``). Nothing here asserts: the numbers are for people and for issues.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import logging
import sys
import threading
import types
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.stores import ORDER, module
from ledger_core import open_async_ledger, open_ledger

REPO = Path(__file__).resolve().parents[1]
PROJECT = tuple(str(REPO / part) + "/" for part in ("ledger_core", "backends"))
DRIVERS = {
    "sqlite": ("sqlite3.",),  # a C module: its calls are seen as c_call events
    "redis": ("redis/",),
    "postgres": ("psycopg/", "psycopg_pool/"),
    "mongodb": ("pymongo/", "motor/"),
    "dynamodb": ("botocore/", "boto3/", "aiobotocore/"),
}


@dataclass
class Trace:
    """What one call ran, in the order it ran it."""

    drivers: tuple[str, ...]
    depth: int | None = None
    before: int | None = None
    functions: set[tuple[str, str]] = field(default_factory=set)
    switches: int = 0
    _last_file: str | None = None

    def _is_driver(self, frame: types.FrameType, event: str, arg: Any) -> bool:
        if event == "c_call":  # a C method of a driver's class, or of a subclass of one
            owners = {getattr(arg, "__module__", None) or ""}
            owners |= {cls.__module__ for cls in type(getattr(arg, "__self__", None)).__mro__}
            return any(f"{o}.".startswith(d) for o in owners for d in self.drivers)
        path = frame.f_code.co_filename
        return any(f"/{d}" in path for d in self.drivers if d.endswith("/"))

    def __call__(self, frame: types.FrameType, event: str, arg: Any) -> None:
        if event not in ("call", "c_call"):
            return
        if self.depth is None and self._is_driver(frame, event, arg):
            self.depth = _project_depth(frame if event == "c_call" else frame.f_back)
            self.before = len(self.functions)
        if event != "call":
            return
        path = frame.f_code.co_filename
        if not path.startswith(PROJECT):
            return
        self.functions.add((path, getattr(frame.f_code, "co_qualname", frame.f_code.co_name)))
        if self._last_file is not None and path != self._last_file:
            self.switches += 1
        self._last_file = path

    @property
    def files(self) -> set[str]:
        return {path for path, _ in self.functions}

    def row(self, label: str) -> str:
        depth, before = ("-", "-") if self.depth is None else (self.depth, self.before)
        return (
            f"  {label:<24} depth {depth:>2}  before {before:>2}  "
            f"functions {len(self.functions):>3}  "
            f"files {len(self.files):>2}  switches {self.switches:>3}"
        )


def _project_depth(frame: types.FrameType | None) -> int:
    depth = 0
    while frame is not None:
        if frame.f_code.co_filename.startswith(PROJECT):
            depth += 1
        frame = frame.f_back
    return depth


_current: list[Trace] = []  # the trace being taken, if any: one profiler serves every thread


def _dispatch(frame: types.FrameType, event: str, arg: Any) -> None:
    if _current:
        _current[0](frame, event, arg)


@contextmanager
def _tracing(drivers: tuple[str, ...]) -> Iterator[Trace]:
    """Trace what runs until the block ends, in this thread and in the ledger's workers
    (an async SQLite ledger runs its statements in a thread of its own)."""
    trace = Trace(drivers)
    _current.append(trace)
    try:
        yield trace
    finally:
        _current.clear()


def _traced(drivers: tuple[str, ...], call: Callable[[], object]) -> Trace:
    with _tracing(drivers) as trace:
        call()
    return trace


CALLS: tuple[tuple[str, str, str], ...] = (
    ("spend (new id)", "spend", "new"),
    ("spend (spent id)", "spend", "spent"),
    ("is_spent", "is_spent", "spent"),
)


def _sync_rows(store: str, url: str) -> Iterator[str]:
    ledger: Any = open_ledger(url, namespace="path", create=True)
    try:
        for n in range(3):  # warm: connections, pools, identity
            ledger.spend(f"warm-{n}")
            ledger.is_spent(f"warm-{n}")
        for label, method, which in CALLS:
            request_id = "path-new" if which == "new" else "warm-0"
            call = functools.partial(getattr(ledger, method), request_id)
            yield _traced(DRIVERS[store], call).row(f"sync {label}")
    finally:
        ledger.close()


def _async_rows(store: str, url: str) -> Iterator[str]:
    async def run() -> list[str]:
        ledger: Any = await open_async_ledger(url, namespace="path-async", create=True)
        rows = []
        try:
            for n in range(3):
                await ledger.spend(f"warm-{n}")
                await ledger.is_spent(f"warm-{n}")
            for label, method, which in CALLS:
                request_id = "path-new" if which == "new" else "warm-0"
                with _tracing(DRIVERS[store]) as trace:
                    await getattr(ledger, method)(request_id)
                rows.append(trace.row(f"async {label}"))
        finally:
            await ledger.aclose()
        return rows

    yield from asyncio.run(run())


def _report(store: str) -> None:
    found = module(store)
    try:
        server: AbstractContextManager[str] = found.server()
        url = server.__enter__()
    except found.UNAVAILABLE as exc:
        print(f"{store}: skipped ({exc})")
        return
    try:
        print(f"{store}:")
        for row in (*_sync_rows(store, url), *_async_rows(store, url)):
            print(row)
    finally:
        server.__exit__(None, None, None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.path", description=__doc__)
    parser.add_argument("stores", nargs="*", default=list(ORDER), help=f"of {', '.join(ORDER)}")
    args = parser.parse_args(argv)
    notices = logging.getLogger("decision_ledger")
    level = notices.level
    notices.setLevel(logging.ERROR)  # the first-open notices of the stores it creates
    threading.setprofile(_dispatch)  # threads started from now on (a ledger's workers)
    sys.setprofile(_dispatch)
    try:
        for store in args.stores:
            _report(store)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
        notices.setLevel(level)
    return 0


if __name__ == "__main__":
    sys.exit(main())
