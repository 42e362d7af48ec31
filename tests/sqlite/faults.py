"""Local faults on a SQLite ledger file, for the suite's C4 local-fault clause.

Each is a context manager inside which the file suffers the fault, made by the test's
own process as root (the tests run as root here and in CI, where a chmod is no fault):

- ``locked``: another connection holds ``BEGIN EXCLUSIVE`` (a backup, a long writer).
- ``read-only``: the file and its WAL are made immutable (``FS_IMMUTABLE_FL``, what
  ``chattr +i`` sets; it binds root too). Open connections fail their writes with an
  I/O error; new ones open read-only ("attempt to write a readonly database").
- ``full``: no write of this process may grow or land in any file (``RLIMIT_FSIZE`` of
  one byte, ``SIGXFSZ`` ignored): SQLite sees its writes fail as on a full disk (an I/O
  error or "database or disk is full"); reads still work. Process-wide, as a full disk
  is machine-wide; nothing else of the test writes a file while it lasts. The fault must
  be entered on the main thread (signal handlers live there).
- ``removed``: the file is renamed away (its WAL stays), so new connections find no
  file, and put back when the fault ends (the same inode, so the records are all there).
"""

from __future__ import annotations

import array
import contextlib
import fcntl
import os
import resource
import signal
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from functools import partial
from pathlib import Path

FS_IOC_GETFLAGS = 0x80086601
FS_IOC_SETFLAGS = 0x40086602
FS_IMMUTABLE_FL = 0x00000010


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    conn = sqlite3.connect(path, isolation_level=None, timeout=30.0)
    try:
        conn.execute("BEGIN EXCLUSIVE")
        yield
        conn.execute("ROLLBACK")
    finally:
        conn.close()


def _immutable(path: Path, on: bool) -> None:
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
    files = [f for f in (path, Path(f"{path}-wal")) if f.exists()]
    done: list[Path] = []
    try:
        for file in files:
            _immutable(file, True)
            done.append(file)
        yield
    finally:
        for file in done:
            _immutable(file, False)


@contextlib.contextmanager
def full(path: Path) -> Iterator[None]:
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
        os.rename(aside, path)


def file_faults(path: Path) -> dict[str, Callable[[], AbstractContextManager[None]]]:
    """Every local fault on ``path``, as the factory contract's ``ledger_local_faults``."""
    return {
        "locked": partial(locked, path),
        "read-only": partial(read_only, path),
        "full": partial(full, path),
        "removed": partial(removed, path),
    }
