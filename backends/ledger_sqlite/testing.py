"""Test and operations support for SQLite ledgers; a ledger never imports this module.

A file has no address for a fault proxy, so C4's faults (``locked``, ``read-only``,
``full``, ``removed``: docs/sqlite.md, "Local faults") are made on the file itself, each
a context manager, each offered only where it works here and now (probed).
"""

from __future__ import annotations

import array
import contextlib
import os
import signal
import sqlite3
import sys
import tempfile
import threading
from collections.abc import Iterator
from functools import partial
from pathlib import Path

from ledger_core.opening import LocalFault, LocalFaults, OpenRequest
from ledger_core.scratch import prefix_bounds
from ledger_core.urls import LedgerURL

from .errors import unavailable
from .options import Target, target, url_path
from .statements import BEGIN_WRITE, COMMIT

FS_IOC_GETFLAGS = 0x80086601
FS_IOC_SETFLAGS = 0x40086602
FS_IMMUTABLE_FL = 0x00000010


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    # mode=rw: a lock on a file that is not there must fail, never create an empty one.
    conn = sqlite3.connect(f"{path.as_uri()}?mode=rw", uri=True, isolation_level=None, timeout=30.0)
    try:
        conn.execute("BEGIN EXCLUSIVE")
        yield
        conn.execute("ROLLBACK")
    finally:
        conn.close()


def _immutable(path: Path, on: bool) -> None:
    import fcntl  # POSIX only: the module imports anywhere, the fault works on Linux

    fd = os.open(path, os.O_RDONLY)
    try:
        flags = array.array("l", [0])
        fcntl.ioctl(fd, FS_IOC_GETFLAGS, flags, True)
        flags[0] = flags[0] | FS_IMMUTABLE_FL if on else flags[0] & ~FS_IMMUTABLE_FL
        fcntl.ioctl(fd, FS_IOC_SETFLAGS, flags, True)
    finally:
        os.close(fd)


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[None]:
    wal = Path(f"{path}-wal")
    files = [path, *([wal] if wal.exists() else [])]  # no ledger file: the fault raises
    with contextlib.ExitStack() as undo:
        for file in files:
            _immutable(file, True)
            undo.callback(_immutable, file, False)
        yield


@contextlib.contextmanager
def full(path: Path) -> Iterator[None]:
    import resource  # POSIX only

    del path  # the whole process's writes: a disk has no room for any file
    limits = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # else the kernel kills us
    try:
        resource.setrlimit(resource.RLIMIT_FSIZE, (1, limits[1]))
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limits)
        signal.signal(signal.SIGXFSZ, handler)


@contextlib.contextmanager
def removed(path: Path) -> Iterator[None]:
    aside = path.with_name(path.name + ".removed")
    os.rename(path, aside)
    try:
        yield
    finally:
        _put_back(aside, path)


def _put_back(aside: Path, path: Path) -> None:
    """Rename ``aside`` to ``path`` unless a file appeared there (a hard link refuses to
    replace one; where links are not supported, look first)."""
    try:
        os.link(aside, path)
    except FileExistsError:
        raise FileExistsError(
            f"{path} was created while the ledger file was moved away; the ledger's own "
            f"file is {aside}: compare the two, nothing was overwritten"
        ) from None
    except OSError:
        if os.path.lexists(path):
            raise
        os.rename(aside, path)
        return
    os.unlink(aside)


def _why_not_immutable(directory: Path) -> str | None:
    """Why the immutable flag cannot be set on a file in ``directory``, or None (it can):
    probed on a file of its own, since a probe killed half-way must never leave the
    user's ledger immutable."""
    if not sys.platform.startswith("linux"):
        return f"the immutable flag (FS_IMMUTABLE_FL) is Linux's; this is {sys.platform}"
    try:
        fd, name = tempfile.mkstemp(prefix=".decision-ledger-probe-", dir=directory)
    except OSError as exc:
        return f"cannot create a probe file in {directory} ({exc})"
    os.close(fd)
    probe = Path(name)
    try:
        _immutable(probe, True)
        _immutable(probe, False)
    except OSError as exc:
        return (
            f"cannot set the immutable flag (chattr +i) on a file in {directory} ({exc}): it "
            "needs root (CAP_LINUX_IMMUTABLE) and a filesystem with the flag"
        )
    finally:
        with contextlib.suppress(OSError):
            probe.unlink()
    return None


def _why_not_full() -> str | None:
    if not hasattr(signal, "SIGXFSZ"):
        return f"RLIMIT_FSIZE and SIGXFSZ are POSIX's; this is {sys.platform}"
    if threading.current_thread() is not threading.main_thread():
        return "it ignores SIGXFSZ, and Python sets signal handlers on the main thread only"
    return None


def file_faults(path: str | os.PathLike[str]) -> LocalFaults:
    """The local faults on ``path`` that work here and now, and why each other is not."""
    file = Path(os.path.abspath(path))
    why_not = {"read-only": _why_not_immutable(file.parent), "full": _why_not_full()}
    withheld = {name: why for name, why in why_not.items() if why is not None}
    made = {"locked": locked, "read-only": read_only, "full": full, "removed": removed}
    offered: dict[str, LocalFault] = {
        name: partial(fault, file) for name, fault in made.items() if name not in withheld
    }
    return LocalFaults(offered, withheld)


# The namespaces in [low, high) (ledger_core.scratch.prefix_bounds; BINARY collation:
# byte order, no pattern). Markers and the genesis are rows like ids: a removed
# namespace's ledgers fail closed.
COUNT_SCRATCH = (
    "SELECT count(DISTINCT namespace) FROM decision_ledger WHERE namespace >= ? AND namespace < ?"
)
DELETE_SCRATCH = "DELETE FROM decision_ledger WHERE namespace >= ? AND namespace < ?"


class Hooks:
    def local_faults(self, url: LedgerURL) -> LocalFaults:
        """:func:`file_faults` on the file a ledger opened from ``url`` uses."""
        return file_faults(Target(url_path(url)).checked().path)

    def remove_scratch(self, url: LedgerURL, prefix: str) -> int:
        """Delete every row of the namespaces named ``prefix...`` (a scratch prefix, else
        refused before any I/O) in one transaction; how many. Never creates the file."""
        bounds = prefix_bounds(prefix)
        found = target(OpenRequest.build(url, create=False))
        uri = f"{Path(found.path).as_uri()}?mode=rw"
        try:
            conn = sqlite3.connect(uri, uri=True, timeout=found.busy_timeout, isolation_level=None)
        except sqlite3.Error as exc:
            raise unavailable("cannot open", found.path, exc) from exc
        try:
            conn.execute(BEGIN_WRITE)
            (count,) = conn.execute(COUNT_SCRATCH, bounds).fetchone()
            conn.execute(DELETE_SCRATCH, bounds)
            conn.execute(COMMIT)
            return int(count)
        except sqlite3.Error as exc:
            raise unavailable("cannot remove scratch namespaces from", found.path, exc) from exc
        finally:
            conn.close()  # a transaction left open is rolled back


HOOKS = Hooks()
