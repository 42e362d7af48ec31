"""What a SQLite ledger is: its ``store_id`` (the namespace's genesis uuid, C6) and what
a spend survives (the filesystem decides)."""

from __future__ import annotations

import os
import re

from ledger_core.doctor import Check, Fact, report, version_fact
from ledger_core.errors import UnsafeStoreConfig
from ledger_core.protocol import Durability, LedgerInfo

from .options import Target

# Filesystems that keep a file only while the machine runs: an acknowledged spend
# survives the writer's crash (the page cache is the store) but not a power loss.
VOLATILE_FILESYSTEMS = frozenset({"tmpfs", "ramfs"})
_MOUNT_ESCAPE = re.compile(r"\\([0-7]{3})")


def filesystem_of(path: str, mounts: str | None = None) -> str | None:
    """The type of the filesystem holding ``path`` (``/proc/self/mounts``; ``None``:
    unknown). Read once per open: the mount cannot change under an open file."""
    if mounts is None:
        try:
            with open("/proc/self/mounts", encoding="utf-8", errors="replace") as f:
                mounts = f.read()
        except OSError:
            return None
    where = os.path.realpath(os.path.dirname(path) or ".")
    found: tuple[int, str] | None = None
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        point = _MOUNT_ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), fields[1])
        inside = where == point or where.startswith(point.rstrip("/") + "/")
        if inside and (found is None or len(point) >= found[0]):  # the last, deepest mount
            found = (len(point), fields[2])
    return None if found is None else found[1]


def store_id(genesis: str, namespace: str) -> str:
    # The uuid has a fixed form, so everything after it is the namespace: no collisions.
    return f"sqlite:{genesis}:{namespace}"


def ledger_info(target: Target, genesis: str, filesystem: str | None) -> LedgerInfo:
    """The ledger's description; a file on tmpfs/ramfs proves only when accepted."""
    proof: str | None = store_id(genesis, target.namespace)
    reason = None
    survives = Durability.MACHINE
    if filesystem in VOLATILE_FILESYSTEMS:
        survives = Durability.PROCESS
        if target.durability != Durability.PROCESS:
            proof = None
            reason = (
                f"the file is on {filesystem}: a spend survives a crash of the process "
                "but not of the machine; pass durability=process to accept that"
            )
    return LedgerInfo(
        backend="sqlite",
        store_id=proof,
        reason=reason,
        location=target.location,
        namespace=target.namespace,
        identity="the namespace's genesis uuid, a row beside its records",
        durability=survives,
    )


def forgot(target: Target, store: str | None) -> UnsafeStoreConfig:
    return UnsafeStoreConfig(
        f"the SQLite ledger {target.path!r} forgot: its identity changed since this "
        f"ledger opened ({store}); reopen it (anything minted under the old store_id is "
        "asked again)"
    )


def moved(target: Target) -> UnsafeStoreConfig:
    return UnsafeStoreConfig(
        f"the SQLite ledger file {target.path!r} was deleted or replaced since this "
        "ledger opened; reopen it (anything minted under the old store_id is asked again)"
    )


# The oldest SQLite library the statements run on: spend_as's upsert ends in RETURNING.
SQLITE_MINIMUM = (3, 35, 0)
SQLITE_NEEDS = "RETURNING in spend_as; UPSERT (3.24) in every spend"
# PRAGMA synchronous: 0 OFF, 1 NORMAL, 2 FULL, 3 EXTRA. FULL syncs the WAL on each commit.
_SYNCHRONOUS = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}


def doctor_checks(
    info: LedgerInfo,
    filesystem: str | None,
    journal_mode: str,
    synchronous: int,
    library: str,
    python: str,
) -> list[Check]:
    """The doctor's lines, from the filesystem read at open and the pragmas; no I/O."""
    version = tuple(int(p) for p in library.split(".") if p.isdigit()) or None
    shown = f"Python sqlite3 module (Python {python})"
    level = _SYNCHRONOUS.get(synchronous, str(synchronous))
    volatile = filesystem in VOLATILE_FILESYSTEMS
    # (passes?, the line when it passes, when it fails, the fix)
    lines = [
        (journal_mode.lower() == "wal", "journal_mode wal (verified on every connection)",
         f"journal_mode {journal_mode}: the ledger needs wal",
         "reopen the ledger: it asks for WAL on every new connection"),
        (synchronous >= 2, f"synchronous {level} (set on each of the ledger's connections: "
         "another process's setting affects only its own commits)",
         f"synchronous {level}: a commit may be lost with the machine",
         "reopen the ledger: it sets synchronous=FULL on every new connection"),
        (not volatile or info.store_id is not None, f"filesystem {filesystem}"
         + (", accepted with durability=process" if volatile else ""),
         f"filesystem {filesystem}: {info.reason}",
         "put the file on a disk, or accept the risk with durability=process"),
    ]  # fmt: skip
    facts = [Fact.judged(*line) for line in lines]
    if filesystem is None:
        unknown = "filesystem unknown (/proc/self/mounts unreadable): taken as a disk"
        facts[-1] = Fact(unknown, None)
    version_line = version_fact("SQLite library", version, SQLITE_MINIMUM, SQLITE_NEEDS, shown)
    return report(info, version_line, facts)
