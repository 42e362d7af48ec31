"""Facts read from the server at open -> ``LedgerInfo`` and the guard (C2, C6); no I/O."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, NamedTuple

from ledger_core.doctor import Check, Fact, report, version_fact
from ledger_core.errors import LedgerUnavailable, UnsafeStoreConfig
from ledger_core.protocol import Durability, LedgerInfo

from . import replication
from .options import PgConfig
from .replication import Topology
from .statements import Guard


@dataclass(frozen=True)
class Probe:
    fsync: str
    in_recovery: bool
    database_oid: int
    table_oid: int | None
    may_read_control: bool
    persistence: str | None = None  # pg_class.relpersistence: p(ermanent), u(nlogged), t(emp)
    has_attempt_column: bool = False  # C10's attempt_digest (tables made before lack it)
    topology: Topology | None = None  # the standbys the primary reports (replication.py)
    filenode: int | None = None  # the table's storage file (Guard.write_condition)


def probe_from_row(row: tuple[Any, ...]) -> Probe:
    return Probe(
        fsync=str(row[0]),
        in_recovery=bool(row[1]),
        database_oid=int(row[2]),
        table_oid=None if row[3] is None else int(row[3]),
        may_read_control=bool(row[4]),
        persistence=None if row[5] is None else str(row[5]),
        has_attempt_column=bool(row[6]),
        filenode=None if row[7] is None else int(row[7]),
    )


def _fsync_refusal(probe: Probe) -> str | None:
    if probe.fsync.lower() == "on":
        return None
    return (
        "fsync is off on this server: a crash can lose recorded ids (C2), "
        "so this ledger never proves"
    )


def _persistence_refusal(probe: Probe) -> str | None:
    if probe.persistence == "u":
        return (
            "the ledger table is unlogged: PostgreSQL empties it in crash recovery (C2), "
            "so this ledger never proves (ALTER TABLE ... SET LOGGED, then reopen)"
        )
    if probe.persistence == "t":
        return "the ledger table is temporary: it ends with its session, so it never proves"
    return None


class Opened(NamedTuple):
    """``reentrant``: the table can record ``spend_as`` digests (C10)."""

    info: LedgerInfo
    guard: Guard
    reentrant: bool = True
    probe: Probe | None = None  # the facts it was decided on (the doctor shows them)


def ledger_info(
    probe: Probe,
    config: PgConfig,
    location: str,
    *,
    system_identifier: str | None,
    genesis: bytes,
    xmin: int,
) -> Opened:
    """The store identity (C6): cluster (``system_identifier``), database, table OID,
    the namespace's genesis token and its row's ``xmin`` (a row restored by COPY, or
    written again, has another), then the namespace (fixed-form fields first)."""
    if probe.table_oid is None:
        raise LedgerUnavailable(f"ledger table {config.qualified} is missing")
    genesis_id = uuid.UUID(bytes=genesis) if len(genesis) == 16 else None
    if genesis_id is None:
        raise UnsafeStoreConfig(
            f"ledger table {config.qualified}: the genesis row of namespace "
            f"{config.namespace!r} is malformed"
        )
    where, row = f"{probe.database_oid}:{probe.table_oid}", f"{genesis_id}.{int(xmin)}"
    if system_identifier is not None:
        kind, rest = "postgres", f"{int(system_identifier)}:{where}:{row}"
        identity = (
            "pg_control_system().system_identifier, the database OID, the table OID and "
            "the namespace's genesis row (its token and xmin)"
        )
    else:
        kind, rest = "postgres-row", f"{row}:{where}"
        identity = (
            "fallback: this role may not read pg_control_system(), so the namespace's "
            "genesis row (its token and xmin), the database OID and the table OID (a "
            "physical copy of the cluster keeps all three)"
        )
    timeline = None
    if config.failover == replication.NEW:
        # Another prefix: no keep-store-id store_id can equal one of these (C7).
        timeline = probe.topology.timeline if probe.topology else None
        if timeline is None:
            raise UnsafeStoreConfig(f"failover={replication.NEW}: no timeline was read")
        kind = f"{kind}-tl{timeline}"
        identity += f", and the timeline ({timeline}: failover={replication.NEW})"
    reason = (
        _fsync_refusal(probe)
        or _persistence_refusal(probe)
        or replication.reason(probe.topology, config.failover)
    )
    info = LedgerInfo(
        backend="postgres",
        store_id=None if reason else f"{kind}:{rest}:{config.namespace}",
        reason=reason,
        location=location,
        namespace=config.namespace,
        identity=identity,
        durability=Durability.NONE if reason else Durability.MACHINE,
    )
    topology = None
    if reason is None and config.failover == replication.KEEP and probe.topology is not None:
        topology = replication.spend_condition(probe.topology)
    guard = Guard(
        config.namespace_bytes,
        genesis,
        probe.table_oid,
        reason is None,
        topology,
        timeline,
        xmin,
        probe.filenode,
    )
    return Opened(info, guard, probe.has_attempt_column, probe)


POSTGRES_MINIMUM = (9, 6)
POSTGRES_NEEDS = (
    "INSERT ... ON CONFLICT, ADD COLUMN IF NOT EXISTS, pg_control_system(), "
    "idle_in_transaction_session_timeout"
)
_PERSISTENCE = {"p": "permanent (logged)", "u": "unlogged", "t": "temporary"}


class ServerSettings(NamedTuple):
    """What the doctor re-reads: nothing here decides proving."""

    version: str
    version_num: int
    synchronous_commit: str  # the server's default; the ledger sets on for its spends
    full_page_writes: str


def _version_of(number: int) -> tuple[int, ...]:
    """``server_version_num`` as a tuple: 90624 -> (9, 6), 150004 -> (15, 4)."""
    if number >= 100000:
        return (number // 10000, number % 10000)
    return (number // 10000, number // 100 % 100)


def settings_from_row(row: tuple[Any, ...]) -> ServerSettings:
    return ServerSettings(str(row[0]), int(row[1]), str(row[2]), str(row[3]))


def doctor_checks(
    opened: Opened, settings: ServerSettings, config: PgConfig, driver: str, libpq: int
) -> list[Check]:
    """The facts open decided on, judged by the same refusals, and the re-read settings."""
    version = _version(settings, driver, libpq)
    facts = [] if opened.probe is None else _server_facts(opened.probe, config)
    return report(opened.info, version, [*facts, *_settings_facts(settings)])


def preflight_checks(
    probe: Probe, settings: ServerSettings, config: PgConfig, driver: str, libpq: int
) -> list[Check]:
    """``decision-ledger doctor`` before ``setup``: the server's settings read as an open
    reads them, judged by the same refusals, and what ``setup`` would create."""
    if probe.table_oid is None:
        creates = Fact(f"table {config.qualified} does not exist yet: setup creates it", None)
    else:
        creates = Fact(
            f"table {config.qualified} exists: setup writes the genesis of namespace "
            f"{config.namespace!r}",
            None,
        )
    facts = [creates, *_server_facts(probe, config), *_settings_facts(settings)]
    return [_version(settings, driver, libpq).check(), *(fact.check() for fact in facts)]


def _version(settings: ServerSettings, driver: str, libpq: int) -> Fact:
    return version_fact(
        "PostgreSQL",
        _version_of(settings.version_num),
        POSTGRES_MINIMUM,
        POSTGRES_NEEDS,
        f"psycopg {driver} (libpq {'.'.join(map(str, _version_of(libpq)))})",
        shown=settings.version,
    )


def _server_facts(probe: Probe, config: PgConfig) -> list[Fact]:
    why = _fsync_refusal(probe)
    fix = "set fsync = on (postgresql.conf), reload"
    facts = [Fact.judged(why is None, f"fsync {probe.fsync}", why or "", fix)]
    if probe.table_oid is not None:
        kind = _PERSISTENCE.get(probe.persistence or "", probe.persistence or "unknown")
        why = _persistence_refusal(probe)
        table = config.qualified
        fix = f"ALTER TABLE {table} SET LOGGED, then reopen"
        facts.append(
            Fact.judged(why is None, f"table {table} is {kind}", f"table {table}: {why}", fix)
        )
    standby = "the server is a standby (in recovery): a ledger opens on the primary only"
    fix = "name the primary in the URL, or add target_session_attrs=read-write"
    facts.append(Fact.judged(not probe.in_recovery, "a primary (not in recovery)", standby, fix))
    return facts + replication.doctor_facts(probe.topology, config.failover)


def _settings_facts(settings: ServerSettings) -> list[Fact]:
    commit = (
        "synchronous_commit on for every spend (set by the ledger; the server's "
        f"default is {settings.synchronous_commit})"
    )
    pages = (
        f"full_page_writes {settings.full_page_writes} (not checked by the ledger; off "
        "risks torn pages after a power loss)"
    )
    return [Fact(commit), Fact(pages, None)]
