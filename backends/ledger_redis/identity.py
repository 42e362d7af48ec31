"""What the servers say about themselves -> whether a store_id may be claimed (C2, C6);
no I/O. The verdict is believed over any option: ``trust_config`` only fills in what
could not be read."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ledger_core.doctor import Check, Fact, parse_version, report, version_fact
from ledger_core.errors import InvalidLedgerURL, UnsafeStoreConfig
from ledger_core.protocol import Durability, LedgerInfo

from .commands import Keys
from .options import RedisOptions

GENESIS_PATTERN = re.compile(rb"[0-9a-f]{32}\Z")


def store_id(kind: str, genesis: bytes, namespace: str, epoch: bytes = b"") -> str:
    # The genesis value is 32 hex digits, then "." and the master's replication id when
    # the store is replicated: everything after the next ":" is the namespace.
    bound = f".{epoch.decode('ascii')}" if epoch else ""
    return f"{kind}:{genesis.decode('ascii')}{bound}:{namespace}"


@dataclass(frozen=True)
class Replication:
    """``EPOCH_BODY``'s answer (``error``: it would not say). With ``backlog`` (a replica
    attached lately), ``replid`` names a history every promotion or restart replaces."""

    role: str = ""
    backlog: bool = False
    replid: str = ""
    replicas: int = 0
    error: str | None = None
    good: int | None = None  # min_slaves_good_slaves; None: min-replicas-to-write unset

    @property
    def epoch(self) -> bytes:
        return self.replid.encode("ascii") if self.backlog else b""


REPLID_PATTERN = re.compile(r"[0-9a-f]{40}\Z")


def replication_from(reply: Any) -> Replication:
    if isinstance(reply, BaseException):
        return Replication(error=_short(reply))
    try:
        role, backlog, replid, replicas, good = (
            v.decode("ascii") if isinstance(v, bytes) else str(v) for v in reply
        )
        count, fine = int(replicas or 0), None if good == "" else int(good)
    except (TypeError, ValueError, UnicodeDecodeError):
        return Replication(error=f"unexpected INFO replication reply {reply!r:.80}")
    if backlog == "1" and not REPLID_PATTERN.match(replid):
        return Replication(error=f"unexpected master_replid {replid!r:.60}")
    return Replication(role, backlog == "1", replid, count, good=fine)


@dataclass(frozen=True)
class ServerFacts:
    node: str
    version: tuple[int, ...] | None = None  # None: the server would not say
    role: str | None = None
    cluster_enabled: bool = False
    maxmemory_policy: str | None = None
    aof_enabled: bool | None = None
    save: str | None = None
    appendfsync: str | None = None
    info_error: str | None = None
    config_error: str | None = None


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def parse_info(reply: Any) -> dict[str, str]:
    if isinstance(reply, Mapping):
        return {str(k): str(v) for k, v in reply.items()}
    out: dict[str, str] = {}
    for line in _text(reply).splitlines():
        if line and not line.startswith("#") and ":" in line:
            name, _, value = line.partition(":")
            out[name.strip()] = value.strip()
    return out


def parse_config(reply: Any) -> dict[str, str]:
    """``CONFIG GET`` as a dict (RESP2 gives a flat list, RESP3 or redis-py a map)."""
    if isinstance(reply, Mapping):
        return {_text(k): _text(v) for k, v in reply.items()}
    items = list(reply)
    return {_text(items[i]): _text(items[i + 1]) for i in range(0, len(items) - 1, 2)}


def facts_from_replies(node: str, info: Any, save: Any, fsync: Any) -> ServerFacts:
    """A refused ``INFO`` or ``CONFIG`` is unknown, never zero."""
    info_error = info if isinstance(info, BaseException) else None
    config_error = next((r for r in (save, fsync) if isinstance(r, BaseException)), None)
    i = {} if info_error is not None else parse_info(info)
    c = {} if config_error is not None else {**parse_config(save), **parse_config(fsync)}
    aof = i.get("aof_enabled")
    return ServerFacts(
        node=node,
        version=parse_version(i["redis_version"]) if "redis_version" in i else None,
        role=i.get("role"),
        cluster_enabled=i.get("cluster_enabled") == "1",
        maxmemory_policy=i.get("maxmemory_policy"),
        aof_enabled=None if aof is None else aof == "1",
        save=c.get("save"),
        appendfsync=c.get("appendfsync"),
        info_error=None if info_error is None else _short(info_error),
        config_error=None if config_error is None else _short(config_error),
    )


def evicts(policy: str) -> bool:
    """Whether a maxmemory-policy may evict keys without an expiry (spent ids have none)."""
    return policy.startswith("allkeys-")


def _short(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:200]


_RANK = {Durability.NONE: 0, Durability.PROCESS: 1, Durability.MACHINE: 2}


def offered(facts: ServerFacts, options: RedisOptions) -> str | None:
    """What an acknowledged spend survives on this server; ``None``: unknown.

    ``appendfsync no`` writes the AOF before replying: it survives kill -9, not a power
    loss. ``everysec`` not even kill -9: during a background fsync Redis postpones the
    write up to 2 s and replies anyway (``flushAppendOnlyFile``; seen lost under load).
    """
    if facts.aof_enabled is False:
        return Durability.NONE
    if facts.aof_enabled is None:
        return None
    if facts.appendfsync == "always" or options.wait_aof:
        return Durability.MACHINE
    if facts.appendfsync is None:
        return None
    if facts.appendfsync == "everysec":
        return Durability.NONE
    return Durability.PROCESS


def _refusal(facts: ServerFacts, options: RedisOptions, level: str | None) -> str | None:
    """Why a server whose settings were read can forget, or ``None``."""
    policy, fsync = facts.maxmemory_policy, facts.appendfsync
    if facts.role is not None and facts.role != "master":
        return f"is a replica (role {facts.role}): its data is a copy"
    if policy is not None and evicts(policy):
        return (
            f"has maxmemory-policy {policy}: it may evict spent ids under memory "
            "pressure (use noeviction or a volatile-* policy)"
        )
    if level == Durability.NONE and facts.aof_enabled:  # appendfsync everysec
        return (
            "has appendfsync everysec: while a background fsync runs, Redis "
            "postpones writing the append-only file for up to 2 s and still replies, so a "
            "crash of the server (kill -9) can lose acknowledged spends; use appendfsync "
            "always (or wait_aof=true on Redis >= 7.2)"
        )
    if level == Durability.NONE:
        what = (
            'no persistence (appendonly no, save ""): a restart forgets every spent id'
            if facts.save == ""
            else f"snapshots only (appendonly no, save {facts.save!r}): a crash of the "
            "server (kill -9) loses every spend since the last snapshot"
        )
        return f"has {what}; use appendonly yes with appendfsync always"
    if options.require_aof and fsync not in (None, "always"):
        return f"has appendfsync {fsync} and require_aof is set: a crash may lose the last writes"
    return None


def assess(facts: ServerFacts, options: RedisOptions) -> tuple[str | None, list[str], str | None]:
    """Whether this server can forget (C2): ``(reason or None, notes, durability)``."""
    notes: list[str] = []
    where = facts.node
    level = offered(facts, options)
    refusal = _refusal(facts, options, level)
    if refusal is not None:
        return f"{where} {refusal}", notes, level
    read = {"the role": facts.role, "maxmemory-policy": facts.maxmemory_policy}
    read["the persistence settings" if facts.aof_enabled is None else "appendfsync"] = level
    unknown = [what for what, value in read.items() if value is None]
    if unknown:
        blocked = "; ".join(e for e in (facts.info_error, facts.config_error) if e)
        what = f"{where}: cannot read {', '.join(unknown)}" + (f" ({blocked})" if blocked else "")
        if not options.trust_config:
            return (
                f"{what}; if the server persists (appendonly yes, appendfsync "
                "always) and never evicts, assert it with trust_config=true",
                notes,
                level,
            )
        notes.append(f"{what}; asserted safe by trust_config")
        if level is None:
            level = options.durability
    fsync = facts.appendfsync
    if level is not None and _RANK[level] < _RANK[options.durability]:
        reason = (
            f"{where} has appendfsync {fsync}: an acknowledged spend survives a "
            "crash of the server process but may be lost with its machine (power loss); "
            "use appendfsync always, or accept it with durability=process"
        )
        return reason, notes, level
    if facts.aof_enabled and fsync not in (None, "always"):
        notes.append(
            f"{where}: appendfsync {fsync}; WAITAOF fsyncs each spend"
            if options.wait_aof
            else f"{where}: appendfsync {fsync}: a spend survives a server crash "
            "(kill -9), not a machine crash (durability=process)"
        )
    return None, notes, level


def new_genesis() -> bytes:
    return os.urandom(16).hex().encode("ascii")


def check_topology(facts: Sequence[ServerFacts], options: RedisOptions, *, cluster: bool) -> None:
    """Refuse what cannot work: a standalone URL on a Cluster node, ``wait_aof`` without AOF."""
    if options.wait_aof and any(f.aof_enabled is False for f in facts):
        raise UnsafeStoreConfig("option 'wait_aof' needs appendonly yes on the server")
    if not cluster and any(f.cluster_enabled for f in facts):
        raise InvalidLedgerURL(
            "the server runs in Cluster mode: open it with redis+cluster:// "
            "(or give the ledger a redis-py RedisCluster client)"
        )


def server_version(facts: Sequence[ServerFacts]) -> tuple[int, ...] | None:
    """The oldest version; ``None`` when any server would not say."""
    versions = [f.version for f in facts if f.version is not None]
    return min(versions) if versions and len(versions) == len(facts) else None


@dataclass(frozen=True)
class Verdict:
    """Why the servers can forget (``reason``), caveats, the weakest durability."""

    reason: str | None
    notes: tuple[str, ...]
    durability: str = Durability.NONE


def judge(facts: Sequence[ServerFacts], options: RedisOptions) -> Verdict:
    assessed = [assess(one, options) for one in facts]
    return Verdict(
        "; ".join(reason for reason, _, _ in assessed if reason is not None) or None,
        tuple(note for _, notes, _ in assessed for note in notes),
        min((level or Durability.NONE for _, _, level in assessed), key=_RANK.__getitem__)
        if assessed
        else Durability.NONE,
    )


def judge_replication(verdict: Verdict, replication: Replication, options: RedisOptions) -> Verdict:
    """Unknown replication refuses (unless ``trust_config``), a non-master refuses."""
    if replication.error is not None:
        what = f"cannot read INFO replication from a script ({replication.error})"
        if options.trust_config:
            return replace(verdict, notes=(*verdict.notes, f"{what}; asserted by trust_config"))
        reason = (
            f"{what}: the store_id cannot be bound to the master's replication, so a "
            "failover could lose spends under it; allow INFO to the ledger's user, or "
            "accept the risk with failover_may_lose_spends=accept"
        )
    elif replication.role != "master":
        role = replication.role or "non-master"
        reason = f"the namespace's server is a {role}: its data is a copy"
    else:
        return verdict
    joined = "; ".join(r for r in (verdict.reason, reason) if r)
    return replace(verdict, reason=joined)


def changed_since_open(info: LedgerInfo, verdict: Verdict) -> UnsafeStoreConfig | None:
    """The periodic re-check: a proving ledger whose store can now forget fails closed
    (and stays failed); a ledger that never proved has nothing to withdraw."""
    if info.store_id is None or verdict.reason is None:
        return None
    return UnsafeStoreConfig(
        f"the store's configuration changed since this ledger opened: {verdict.reason}; "
        "this ledger stays failed closed: reopen"
    )


def ledger_info(
    *,
    kind: str,
    location: str,
    namespace: str,
    genesis: bytes | None,
    verdict: Verdict,
    keys: Keys | None = None,
    epoch: bytes | None = None,
) -> LedgerInfo:
    """``genesis``: as :func:`.decisions._genesis` checked it; ``None`` on a server that
    cannot even write one."""
    name = (keys or Keys(namespace)).genesis
    identity = (
        f"random genesis value in key {name.decode()!r}, set with "
        "SET NX by the first opener (a copy of the data set carries it: move a ledger "
        "with migrate)"
    )
    if verdict.notes:
        identity += "; " + "; ".join(verdict.notes)
    identity += (
        "; every spend and read proves the genesis in the same round trip (one script); "
        "the configuration is re-checked at most every recheck_interval seconds"
    )
    if epoch:
        identity += (
            f"; replicated: bound to master_replid {epoch.decode()}, proven by every "
            "spend and read (a failover or restart of the master gives a new store_id)"
        )
    elif epoch is not None:
        identity += "; no replication: every spend and read proves there is still none"
    proves = genesis is not None and verdict.reason is None
    reason = verdict.reason
    if proves and verdict.durability == Durability.PROCESS:
        reason = (
            "durability=process accepted: an acknowledged spend survives a crash of the "
            "server process, not necessarily of its machine (" + "; ".join(verdict.notes) + ")"
        )
    if genesis is None and reason is None:
        reason = "no genesis could be read or written on this server"
    if proves and epoch is None and reason is None:
        reason = (
            "failover_may_lose_spends=accept (or replication unknown, asserted by "
            "trust_config): the store_id is not bound to the master's replication, so a "
            "failover to a replica that missed a spend reads it as unspent under this "
            "same store_id"
        )
    return LedgerInfo(
        backend=kind,
        store_id=store_id(kind, genesis, namespace, epoch or b"") if proves and genesis else None,
        reason=reason,
        location=location,
        namespace=namespace,
        identity=identity,
        durability=verdict.durability,
    )


_PRIMARY = "point the URL at the primary"
_NO_EVICTION = "set maxmemory-policy noeviction (or a volatile-* policy)"


def _unknown_fact(where: str, what: str, options: RedisOptions, facts: ServerFacts) -> Fact:
    blocked = "; ".join(e for e in (facts.info_error, facts.config_error) if e)
    detail = f"{where}{what} unknown" + (f" ({blocked})" if blocked else "")
    fix = "let the ledger read INFO and CONFIG GET, or assert the setting with trust_config=true"
    trusted = "asserted safe by trust_config" if options.trust_config else ""
    return Fact.unknown(detail, fix, trusted)


def _persistence_fact(where: str, facts: ServerFacts, options: RedisOptions) -> Fact:
    level = offered(facts, options)
    if level is None:
        return _unknown_fact(where, "appendonly/appendfsync", options, facts)
    if not facts.aof_enabled:
        said = f"appendonly no, save {facts.save!r}"
    else:
        said = f"appendonly yes, appendfsync {facts.appendfsync}"
        if options.wait_aof:
            said += ", WAITAOF on each spend (wait_aof)"
    fix = "set appendonly yes and appendfsync always (CONFIG SET, and in redis.conf)"
    if level == Durability.NONE:
        return Fact(f"{where}{said}: a crash loses spends", False, fix)
    if options.require_aof and facts.appendfsync not in (None, "always"):
        return Fact(f"{where}{said}, and require_aof is set", False, fix)
    if _RANK[level] < _RANK[options.durability]:
        why = f"{where}{said}: a spend survives a server crash, not a machine crash"
        return Fact(why, False, fix + "; or accept it with durability=process")
    if level == Durability.PROCESS:
        return Fact(f"{where}{said}, accepted with durability=process")
    return Fact(f"{where}{said}")


_PROMOTION = (
    "Sentinel and Cluster promote by replica priority and replication offset, never by "
    "which replica acknowledged a spend (WAIT is best-effort), so a failover may lose "
    "the latest spends"
)


def replication_facts(
    replication: Replication | None, options: RedisOptions, *, sentinel: bool
) -> list[Fact]:
    if options.failover_may_lose_spends:
        accepted = "failover_may_lose_spends=accept: the store_id survives a failover; "
        return [_replication(f"{accepted}{_PROMOTION}, and they then read as unspent under it")]
    if replication is None:
        return []
    if replication.error is not None:
        line = f"INFO replication unreadable from a script ({replication.error})"
        fix = "allow INFO to the ledger's user, or set failover_may_lose_spends=accept"
        trusted = "asserted by trust_config" if options.trust_config else ""
        return [Fact.unknown(line, fix, trusted, "replication")]
    if replication.role != "master":
        return [Fact(f"role {replication.role}", False, _PRIMARY, "replication")]
    if not replication.backlog:
        bound = (
            "no replica (no replication backlog): no failover target holds a copy; every "
            "spend and read proves there is still none (a replica attaching fails this "
            "ledger closed; a new one binds its store_id to the master's replid)"
        )
        lines = [Fact(bound, name="replication")]
    else:
        bound = (
            f"{replication.replicas} replica(s) connected; store_id bound to master_replid "
            f"{replication.replid[:12]}..., proven by every spend and read: a failover or "
            "restart of the master gives a new store_id (hosts ask again, H5), so a spend "
            "a promoted replica missed never reads unspent under this one"
        )
        waits = (
            f"wait_replicas={options.wait_replicas} of {replication.replicas} connected: each "
            "True waited for them (fewer spends lost across a failover; short of them: "
            "AmbiguousSpend)"
            if options.wait_replicas
            else "no WAIT: a failover loses the spends the promoted replica had not "
            "received (under the old store_id only); wait_replicas=N narrows that"
        )
        if replication.good is None:
            split = "min-replicas-to-write unset: a partitioned master keeps taking spends"
        else:
            split = f"min-replicas-to-write set ({replication.good} good now): a partitioned "
            split += "master stops taking spends once its replicas lag"
        split += " (until demoted, under the old store_id only; lost with it)"
        lines = [Fact(bound, name="replication"), _replication(waits), _replication(split)]
    if sentinel:
        lines.append(_replication("Sentinel: " + _PROMOTION))
    return lines


def _replication(line: str) -> Fact:
    """A replication line with nothing to judge: what a failover would do."""
    return Fact(line, None, name="replication")


def doctor_checks(
    facts: Sequence[ServerFacts],
    options: RedisOptions,
    info: LedgerInfo,
    driver: str,
    replication: Replication | None = None,
    *,
    sentinel: bool = False,
) -> list[Check]:
    version_line, lines = _settings(facts, options, driver, replication, sentinel=sentinel)
    return report(info, version_line, lines)


def settings_checks(
    facts: Sequence[ServerFacts], options: RedisOptions, driver: str
) -> list[Check]:
    """The servers' settings alone, as the doctor judges them for a ledger: for a store
    not set up yet (no genesis, so no identity or replication to judge)."""
    version_line, lines = _settings(facts, options, driver, None, sentinel=False)
    return [version_line.check(), *(line.check() for line in lines)]


def _settings(
    facts: Sequence[ServerFacts],
    options: RedisOptions,
    driver: str,
    replication: Replication | None,
    *,
    sentinel: bool,
) -> tuple[Fact, list[Fact]]:
    many = len(facts) > 1
    # What the commands need of a server: EVALSHA scripts (2.6), SET ... NX for the
    # genesis (2.6.12), SCAN for listings (2.8); WAITAOF (7.2) only with wait_aof.
    minimum, needs = (2, 8, 0), "EVALSHA scripts, SET NX for the genesis, SCAN for listings"
    if options.wait_aof:
        minimum, needs = (7, 2, 0), "WAITAOF on each spend (wait_aof)"
    version_line = version_fact(
        f"oldest of {len(facts)} Redis servers" if many else "Redis",
        server_version(facts),
        minimum,
        needs,
        f"redis-py {driver}",
        unknown="a server does not report its version (INFO refused)",
    )
    lines: list[Fact] = []
    for one in facts:
        where = f"{one.node}: " if many else ""
        settings = (
            ("role", one.role, one.role != "master", ": its data is a copy", _PRIMARY),
            (
                "maxmemory-policy",
                one.maxmemory_policy,
                evicts(one.maxmemory_policy or ""),
                ": spent ids may be evicted",
                _NO_EVICTION,
            ),
        )
        for name, value, unsafe, why, fix in settings:
            if value is None:
                lines.append(_unknown_fact(where, name, options, one))
            else:
                seen = f"{where}{name} {value}"
                lines.append(Fact.judged(not unsafe, seen, seen + why, fix))
        lines.append(_persistence_fact(where, one, options))
    lines += replication_facts(replication, options, sentinel=sentinel)
    return version_line, lines
