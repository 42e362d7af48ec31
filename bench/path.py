"""``python -m bench.path``: how far one warm call travels, against issue 40's bars.

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
- ``switches``: how often consecutive project calls change file;
- ``bars``: ``ok``, or ``MISSED`` and which of :data:`BARS` the call exceeds (depth at most
  5; at most 15 functions in at most 6 files).

Under each store it counts the lines of ``backends/ledger_<store>/``: hand-written, and
generated apart (a file whose first line starts with :data:`GENERATED`); ``--base REV``
adds the same count at a git revision. "Project" is code under ``ledger_core/`` and
``backends/``, generated files included; "driver" is the store's client library
(``DRIVERS``). ``--check`` exits 1 when a traced call misses a bar; otherwise the numbers
are for people and for issues.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import logging
import subprocess
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
# Issue 40's bars, per traced call: (what, the most allowed).
BARS = (("depth", 5), ("functions", 15), ("files", 6))
# The first line of a generated file starts with this (``scripts/async_to_sync.py``'s
# HEADER: "# Generated from aio.py by scripts/async_to_sync.py: edit that file, not
# this."); its lines are counted apart from the hand-written ones.
GENERATED = "# Generated from "


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

    def missed(self) -> list[str]:
        """The bars this call exceeds, each as ``what count > most`` (a call whose driver
        was never seen misses the depth bar: nothing proves it short)."""
        counts = {"depth": self.depth, "functions": len(self.functions), "files": len(self.files)}
        missed = []
        for what, most in BARS:
            count = counts[what]
            if count is None or count > most:
                missed.append(f"{what} {'?' if count is None else count} > {most}")
        return missed

    def row(self, label: str) -> str:
        depth, before = ("-", "-") if self.depth is None else (self.depth, self.before)
        missed = self.missed()
        return (
            f"  {label:<24} depth {depth:>2}  before {before:>2}  "
            f"functions {len(self.functions):>3}  "
            f"files {len(self.files):>2}  switches {self.switches:>3}  "
            + ("bars ok" if not missed else f"bars MISSED: {', '.join(missed)}")
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


def _sync_traces(store: str, url: str) -> Iterator[tuple[str, Trace]]:
    ledger: Any = open_ledger(url, namespace="path", create=True)
    try:
        for n in range(3):  # warm: connections, pools, identity
            ledger.spend(f"warm-{n}")
            ledger.is_spent(f"warm-{n}")
        for label, method, which in CALLS:
            request_id = "path-new" if which == "new" else "warm-0"
            call = functools.partial(getattr(ledger, method), request_id)
            yield f"sync {label}", _traced(DRIVERS[store], call)
    finally:
        ledger.close()


def _async_traces(store: str, url: str) -> list[tuple[str, Trace]]:
    async def run() -> list[tuple[str, Trace]]:
        ledger: Any = await open_async_ledger(url, namespace="path-async", create=True)
        traces = []
        try:
            for n in range(3):
                await ledger.spend(f"warm-{n}")
                await ledger.is_spent(f"warm-{n}")
            for label, method, which in CALLS:
                request_id = "path-new" if which == "new" else "warm-0"
                with _tracing(DRIVERS[store]) as trace:
                    await getattr(ledger, method)(request_id)
                traces.append((f"async {label}", trace))
        finally:
            await ledger.aclose()
        return traces

    return asyncio.run(run())


@dataclass
class Lines:
    """The lines of one backend's Python files: hand-written, and generated apart."""

    written: int = 0
    generated: int = 0
    generated_files: list[str] = field(default_factory=list)

    def add(self, name: str, text: str) -> None:
        count = len(text.splitlines())
        if text.startswith(GENERATED):
            self.generated += count
            self.generated_files.append(name)
        else:
            self.written += count

    def __add__(self, other: Lines) -> Lines:
        files = self.generated_files + other.generated_files
        return Lines(self.written + other.written, self.generated + other.generated, files)

    def row(self, base: Lines | None = None, rev: str = "") -> str:
        shown = f"  lines {self.written:>6,} hand-written"
        if base is not None:
            shown += f" ({rev}: {base.written:,}, {self.written - base.written:+,})"
        files = f" ({', '.join(sorted(self.generated_files))})" if self.generated_files else ""
        return f"{shown}, {self.generated:,} generated{files}"


def backend_dir(store: str) -> str:
    return f"backends/ledger_{store}"


def lines_now(store: str, root: Path = REPO) -> Lines:
    """The lines under the store's backend directory in the work tree."""
    lines = Lines()
    for path in sorted((root / backend_dir(store)).rglob("*.py")):
        lines.add(path.name, path.read_text(encoding="utf-8"))
    return lines


def lines_at(store: str, rev: str, root: Path = REPO) -> Lines:
    """The same count at git revision ``rev``."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(root), *args], check=True, capture_output=True, text=True
        ).stdout

    lines = Lines()
    for name in git("ls-tree", "-r", "--name-only", rev, "--", backend_dir(store)).split():
        if name.endswith(".py"):
            lines.add(Path(name).name, git("show", f"{rev}:{name}"))
    return lines


def _report(store: str, trace: bool, base: str | None) -> int:
    """Print the store's rows and lines; return how many traced calls miss a bar."""
    print(f"{store}:")
    missed = 0
    if trace:
        found = module(store)
        try:
            server: AbstractContextManager[str] = found.server()
            url = server.__enter__()
        except found.UNAVAILABLE as exc:
            print(f"  not traced: no server ({exc})")
        else:
            try:
                for label, taken in (*_sync_traces(store, url), *_async_traces(store, url)):
                    print(taken.row(label))
                    missed += bool(taken.missed())
            finally:
                server.__exit__(None, None, None)
    before = None if base is None else lines_at(store, base)
    print(lines_now(store).row(before, base or ""))
    return missed


def _total(stores: list[str], base: str | None) -> None:
    """Every store's lines together (issue 40 asks for a drop across all backends)."""
    now = sum((lines_now(store) for store in stores), Lines())
    before = None if base is None else sum((lines_at(store, base) for store in stores), Lines())
    print(f"all backends:\n{now.row(before, base or '')}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.path",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("stores", nargs="*", default=list(ORDER), help=f"of {', '.join(ORDER)}")
    parser.add_argument("--base", metavar="REV", help="also count the lines at git revision REV")
    parser.add_argument("--lines-only", action="store_true", help="count lines, trace nothing")
    parser.add_argument("--check", action="store_true", help="exit 1 when a call misses a bar")
    args = parser.parse_args(argv)
    notices = logging.getLogger("decision_ledger")
    level = notices.level
    notices.setLevel(logging.ERROR)  # the first-open notices of the stores it creates
    threading.setprofile(_dispatch)  # threads started from now on (a ledger's workers)
    sys.setprofile(_dispatch)
    try:
        missed = sum(_report(store, not args.lines_only, args.base) for store in args.stores)
        if len(args.stores) > 1:
            _total(args.stores, args.base)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
        notices.setLevel(level)
    if missed:
        print(f"{missed} traced call(s) miss a bar (issue 40: {_bars_text()})")
    return 1 if missed and args.check else 0


def _bars_text() -> str:
    return ", ".join(f"{what} <= {most}" for what, most in BARS)


if __name__ == "__main__":
    sys.exit(main())
