"""Standbys and failover (C2, C6): which replicated topologies prove, and why; no I/O.

A commit waits only for synchronous standbys, so ``failover=keep-store-id`` proves only
when every standby acknowledges every commit: read at open, proven again by every spend
(:func:`spend_condition`). ``failover=new-store-id`` puts the timeline in the store_id
instead, proven by every statement: any promotion is a new store (H5).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ledger_core.doctor import Fact

KEEP, NEW = "keep-store-id", "new-store-id"
FAILOVER_MODES = (KEEP, NEW)
_FIX_MODE = f"or open with failover={NEW} (every failover then changes store_id: H5)"


@dataclass(frozen=True)
class SyncConfig:
    method: str  # "FIRST", "ANY", or "" (no synchronous standby)
    num: int
    names: tuple[str, ...]


_FORM = re.compile(r"\s*(?:(FIRST|ANY)\s+)?(\d+)\s*\((.*)\)\s*", re.IGNORECASE | re.DOTALL)


def parse_sync_names(text: str) -> SyncConfig:
    """``FIRST n (a, b)``, ``ANY n (...)``, ``n (...)`` or a plain list, as PostgreSQL."""
    if not text.strip():
        return SyncConfig("", 0, ())
    match = _FORM.fullmatch(text)
    method, num, body = ("FIRST", 1, text) if match is None else match.groups()
    names = tuple(
        name[1:-1].replace('""', '"') if name.startswith('"') else name
        for name in (part.strip() for part in re.findall(r'(?:"(?:[^"]|"")*"|[^,])+', body))
        if name
    )
    return SyncConfig(str(method or "FIRST").upper(), int(num), names)


@dataclass(frozen=True)
class Standby:
    name: str | None  # application_name (None: this role may not see it)
    state: str | None
    sync_state: str | None


@dataclass(frozen=True)
class Topology:
    sync_names: str
    standbys: tuple[Standby, ...]
    idle_slots: tuple[str, ...]  # physical replication slots with no standby attached
    timeline: int | None = None  # read only for failover=new-store-id


def topology_from_row(row: tuple[Any, ...]) -> Topology:
    standbys = tuple(Standby(s.get("name"), s.get("state"), s.get("sync")) for s in _json(row[1]))
    timeline = None if row[3] is None else int(str(row[3])[:8], 16)
    return Topology(str(row[0]), standbys, tuple(_json(row[2])), timeline)


def _json(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(json.loads(value) if isinstance(value, str) else value)


# The setting, the physical walsenders (a logical subscriber is another store), idle
# physical slots, and (new-store-id) the WAL file name, whose first 8 digits are the
# timeline.
TOPOLOGY = (
    "SELECT current_setting('synchronous_standby_names'), "
    "(SELECT json_agg(json_build_object('name', r.application_name, 'state', r.state, "
    "'sync', r.sync_state)) FROM pg_catalog.pg_stat_replication AS r "
    "WHERE r.state IS DISTINCT FROM 'backup' AND r.pid NOT IN (SELECT l.active_pid "
    "FROM pg_catalog.pg_replication_slots AS l WHERE l.slot_type = 'logical' "
    "AND l.active_pid IS NOT NULL)), "
    "(SELECT json_agg(s.slot_name) FROM pg_catalog.pg_replication_slots AS s "
    "WHERE s.slot_type = 'physical' AND NOT s.active), {timeline}"
)
TIMELINE_NOW = "pg_catalog.pg_walfile_name(pg_catalog.pg_current_wal_insert_lsn())"


def refusals(topology: Topology) -> list[tuple[str, str]]:
    """Why a failover could lose an acknowledged spend, each with its fix."""
    config = parse_sync_names(topology.sync_names)
    quorum = [s for s in topology.standbys if s.sync_state == "quorum"]
    out: list[tuple[str, str]] = []
    for standby in topology.standbys:
        if standby.sync_state is None:
            why = (
                "this role may not see the standbys' replication state "
                "(pg_stat_replication shows a standby without details)"
            )
            out.append((why, f"GRANT pg_read_all_stats TO the ledger's role, {_FIX_MODE}"))
        elif standby.sync_state not in ("sync", "quorum"):
            why = (
                f"standby {standby.name or '?'!r} is {standby.sync_state} ({standby.state}): "
                "commits do not wait for it, so a failover to it can lose acknowledged spends"
            )
            fix = (
                "make every standby synchronous: synchronous_standby_names = "
                f"'FIRST {len(topology.standbys)} (...)' naming each, reload; {_FIX_MODE}"
            )
            out.append((why, fix))
    if config.method == "ANY" and len(quorum) > config.num:
        why = (
            f"ANY {config.num} of {len(quorum)} quorum standbys: a commit waits for "
            f"{config.num} of them, so a failover to another can lose it"
        )
        fix = (
            f"synchronous_standby_names = 'ANY {len(quorum)} (...)', or a failover "
            f"manager that promotes only a standby holding every commit; {_FIX_MODE}"
        )
        out.append((why, fix))
    for slot in topology.idle_slots:
        why = (
            f"physical replication slot {slot!r} has no standby attached: a standby "
            "that follows it lacks what was acknowledged meanwhile"
        )
        fix = (
            f"SELECT pg_drop_replication_slot('{slot}') if no standby uses it, or "
            f"attach that standby as synchronous; {_FIX_MODE}"
        )
        out.append((why, fix))
    return out


def reason(topology: Topology | None, mode: str) -> str | None:
    found = [] if topology is None or mode == NEW else refusals(topology)
    if not found:
        return None
    return "; ".join(why for why, _ in found) + " (C2), so this ledger never proves"


def spend_condition(topology: Topology) -> str:
    """What every ``keep-store-id`` spend proves: every physical walsender ``sync``
    (under ``ANY n``: the setting unchanged, at most ``n`` ``quorum``), no idle slot."""
    config = parse_sync_names(topology.sync_names)
    senders = (
        "FROM pg_catalog.pg_stat_get_wal_senders() AS w WHERE w.state IS DISTINCT FROM "
        "'backup' AND NOT EXISTS (SELECT FROM pg_catalog.pg_get_replication_slots() AS l "
        "WHERE l.active_pid = w.pid AND l.slot_type = 'logical')"
    )
    covered = "w.sync_state = 'sync'"
    quorum = ""
    if config.method == "ANY":  # n is the setting's: it must still be the one read at open
        names = topology.sync_names.encode().hex()  # hex digits: nothing to escape or format
        covered += " OR w.sync_state = 'quorum'"
        quorum = (
            "convert_to(current_setting('synchronous_standby_names'), 'UTF8') = "
            f"decode('{names}', 'hex') AND (SELECT count(*) {senders} "
            f"AND w.sync_state = 'quorum') <= {config.num} AND "
        )
    return (
        f"{quorum}NOT EXISTS (SELECT {senders} AND NOT coalesce({covered}, false)) "
        "AND NOT EXISTS (SELECT FROM pg_catalog.pg_get_replication_slots() AS s "
        "WHERE s.slot_type = 'physical' AND NOT s.active)"
    )


def timeline_condition(timeline: int) -> str:
    return f"left({TIMELINE_NOW}, 8) = '{timeline:08X}'"


def doctor_facts(topology: Topology | None, mode: str) -> list[Fact]:
    if topology is None:
        return []
    config = parse_sync_names(topology.sync_names)
    shown = f"{config.method} {config.num} ({', '.join(config.names)})" if config.method else "none"
    waits = (
        f"synchronous_standby_names = {topology.sync_names!r} (read as {shown}); each "
        "spend's commit waits at synchronous_commit = on: flushed on every synchronous "
        "standby, which a promotion replays"
    )
    facts = [Fact(waits, None, name="replication")]
    for standby in topology.standbys:
        ok = standby.sync_state in ("sync", "quorum")
        what = f"standby {standby.name!r}: {standby.state}, {standby.sync_state}"
        facts.append(Fact(what, ok or None, name="replication"))
    if not topology.standbys and not topology.idle_slots:
        none = "no standby attached, no idle physical slot"
        facts.append(Fact(none, name="replication"))
    if mode == NEW:
        bound = (
            f"failover={NEW}: store_id carries timeline {topology.timeline}, proven by "
            "every statement; any promotion is a new store (hosts ask again, H5)"
        )
        return [*facts, Fact(bound, name="replication")]
    return facts + [Fact(why, False, fix, "replication") for why, fix in refusals(topology)]
