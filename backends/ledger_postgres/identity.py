"""Facts read from the server at open -> ``LedgerInfo`` and the guard (C2, C6); no I/O."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, NamedTuple

from ledger_core.errors import LedgerUnavailable, UnsafeStoreConfig
from ledger_core.protocol import Durability, LedgerInfo

from .commands import Guard
from .errors import standby_error
from .options import PgConfig


@dataclass(frozen=True)
class Probe:
    """The facts read at open that decide whether and how this ledger proves."""

    fsync: str
    in_recovery: bool
    database_oid: int
    table_oid: int | None
    may_read_control: bool
    persistence: str | None = None  # pg_class.relpersistence: p(ermanent), u(nlogged), t(emp)
    has_attempt_column: bool = False  # C10's attempt_digest (tables made before lack it)


def probe_from_row(row: tuple[Any, ...]) -> Probe:
    return Probe(
        fsync=str(row[0]),
        in_recovery=bool(row[1]),
        database_oid=int(row[2]),
        table_oid=None if row[3] is None else int(row[3]),
        may_read_control=bool(row[4]),
        persistence=None if row[5] is None else str(row[5]),
        has_attempt_column=bool(row[6]),
    )


def refuse_standby(probe: Probe, config: PgConfig) -> None:
    if probe.in_recovery:
        raise standby_error(f"opening ledger {config.qualified}")


def in_hot_standby(parameter: bytes | None) -> bool:
    """PostgreSQL 14+ reports ``in_hot_standby`` on every connection, for free."""
    return parameter == b"on"


def _cannot_prove(probe: Probe) -> str | None:
    """Why acknowledged spends could be lost in a crash of the server process, if so."""
    if probe.fsync.lower() != "on":
        return (
            "fsync is off on this server: a crash can lose recorded ids (C2), "
            "so this ledger never proves"
        )
    if probe.persistence == "u":
        return (
            "the ledger table is unlogged: PostgreSQL empties it in crash recovery (C2), "
            "so this ledger never proves (ALTER TABLE ... SET LOGGED, then reopen)"
        )
    if probe.persistence == "t":
        return "the ledger table is temporary: it ends with its session, so it never proves"
    return None


class Opened(NamedTuple):
    """What opening found: the description, the guard every operation proves, and
    whether the table can record ``spend_as`` digests (C10)."""

    info: LedgerInfo
    guard: Guard
    reentrant: bool = True


def ledger_info(
    probe: Probe,
    config: PgConfig,
    location: str,
    *,
    system_identifier: str | None,
    genesis: bytes,
) -> Opened:
    """The store identity (C6): the cluster, the database, the table and its genesis
    row, plus the namespace.

    ``system_identifier`` is fixed by initdb, so another cluster (a dump restored
    elsewhere) differs; the table's OID changes when it is dropped and re-created; the
    genesis token changes when the table forgets (TRUNCATE) and is opened again. The
    fields before the namespace have fixed forms, so the namespace cannot collide.
    """
    if probe.table_oid is None:
        raise LedgerUnavailable(f"ledger table {config.qualified} is missing")
    genesis_id = uuid.UUID(bytes=genesis) if len(genesis) == 16 else None
    if genesis_id is None:
        raise UnsafeStoreConfig(f"ledger table {config.qualified}: its genesis row is malformed")
    where = f"{probe.database_oid}:{probe.table_oid}"
    if system_identifier is not None:
        store_id: str | None = f"postgres:{int(system_identifier)}:{where}:{genesis_id}"
        identity = (
            "pg_control_system().system_identifier, the database OID, the table OID and "
            "the table's genesis row"
        )
    else:
        store_id = f"postgres-row:{genesis_id}:{where}"
        identity = (
            "fallback: this role may not read pg_control_system(), so the table's genesis "
            "row, the database OID and the table OID (a dump restored into another cluster "
            "could carry the row and meet an equal OID)"
        )
    store_id = f"{store_id}:{config.namespace}"
    reason = _cannot_prove(probe)
    if reason is not None:
        store_id = None
    info = LedgerInfo(
        backend="postgres",
        store_id=store_id,
        reason=reason,
        location=location,
        namespace=config.namespace,
        identity=identity,
        durability=Durability.NONE if reason else Durability.MACHINE,
    )
    guard = Guard(genesis, probe.table_oid, durable=reason is None)
    return Opened(info, guard, probe.has_attempt_column)
