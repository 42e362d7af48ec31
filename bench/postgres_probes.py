"""PostgreSQL-only probes of where a spend's time goes (the one bench gives the ratios).

    python -m bench.postgres_probes --per-call     # client work per spend, 1 thread
    python -m bench.postgres_probes --guard-cost   # server work of the in-statement guard
    python -m bench.postgres_probes --server-cpu   # the spend's server CPU, load or not

``--per-call`` runs the server with ``fsync = off`` (``ALTER SYSTEM``, for this run only;
never how a ledger should run) so no commit waits for the disk, whose flush times swing
far more than the client's work: 30 alternated rounds of 1000 single-thread spends each
side, wall and thread-CPU microseconds per call, paired per round (median of ours - raw),
against the hand-written INSERT on the ledger's pool and on a plain connection.

``--guard-cost`` prices the guard each statement carries (the namespace's genesis row,
and for a proving ledger's spends ``fsync``, the table's persistence and the standbys):
a spend's guard evaluated alone (genesis only, durable, full) against a bare SELECT, and
the raw SELECT against the ledger's guarded read, medians per call.

``--server-cpu`` sends the ledger's own prepared spend statement and the raw INSERT, each
on its own session of the harness's local server, and reads each backend's CPU time from
``/proc`` (a shared, loaded machine swings wall times far more than the gap measured;
a backend's CPU time does not wait for others): microseconds per statement, spent ids and
new ids, the mean over alternated rounds.
"""

from __future__ import annotations

import itertools
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from bench.stores import postgres as store
from ledger_core import open_ledger

_ids = itertools.count()
NS = b"default"


def _rid(tag: str) -> bytes:
    return f"{tag}-{next(_ids)}".encode()


def per_call(url: str, rounds: int = 30, calls: int = 1000) -> None:
    """Per-spend client cost at one thread: paired rounds, medians."""
    table = "bench_per_call"
    own: Any = open_ledger(url, table=table, pool_max=2)
    pool = store.pool_of(own)
    insert, _ = store.statements(sql.Identifier(table))

    plain_conn = psycopg.connect(url, autocommit=True)

    def raw() -> None:
        with pool.connection() as conn:
            conn.execute(insert, (NS, _rid("raw"), b"t" * 16))

    def plain() -> None:  # by hand on a plain connection of its own, no pool
        plain_conn.execute(insert, (NS, _rid("plain"), b"t" * 16))

    def ours() -> None:
        own.spend(_rid("ours").decode())

    def timed(op: Callable[[], None]) -> tuple[float, float]:
        wall, cpu = time.perf_counter_ns(), time.thread_time_ns()
        for _ in range(calls):
            op()
        return (
            (time.perf_counter_ns() - wall) / calls / 1e3,
            (time.thread_time_ns() - cpu) / calls / 1e3,
        )

    try:
        for _ in range(calls):  # warm up: pool, prepared statements
            raw()
            plain()
            ours()
        got: dict[str, list[tuple[float, float]]] = {"ours": [], "raw": [], "plain": []}
        for i in range(rounds):
            sides = (("ours", ours), ("raw", raw), ("plain", plain))
            for side, op in sides if i % 2 == 0 else sides[::-1]:
                got[side].append(timed(op))
    finally:
        own.close()
        plain_conn.close()
    for base in ("raw", "plain"):
        for k, what in ((0, "wall"), (1, "cpu")):
            pairs = list(zip(got["ours"], got[base], strict=True))
            o = statistics.median(x[k] for x in got["ours"])
            r = statistics.median(x[k] for x in got[base])
            diff = statistics.median(a[k] - b[k] for a, b in pairs)
            ratio = statistics.median(b[k] / a[k] for a, b in pairs)
            print(
                f"spend x1 {what:<4} ours {o:6.1f} us  {base:<5} {r:6.1f} us  "
                f"ours-{base} {diff:5.1f} us  ratio {ratio:4.2f}"
            )


def guard_cost(url: str, rounds: int = 20, calls: int = 1000) -> None:
    """What the in-statement guard costs the server per call: the spend's guard alone
    (its token subquery, and the standby check), against a bare SELECT; reads as the
    raw SELECT against the ledger's. No commit is timed: a forced synchronous commit
    in the spend's guard would otherwise be compared with the session's async one."""
    from ledger_postgres.options import PgConfig
    from ledger_postgres.statements import Statements

    table = "bench_guard"
    own: Any = open_ledger(url, table=table)
    guard = own._st.guard
    own.close()
    assert guard is not None
    config = PgConfig(table=table)
    ident = sql.Identifier(table)

    def alone(g: Any) -> bytes:
        token = sql.SQL("(SELECT g.token FROM {} AS g WHERE {})").format(
            ident, sql.SQL(g.condition(spend=True))
        )
        return sql.SQL("SELECT {}").format(g.namespace_value(token, spend=True)).as_bytes(None)

    genesis = alone(guard._replace(durable=False, topology=None))
    durable = alone(guard._replace(durable=True, topology=None))
    full = alone(guard._replace(durable=True))  # and the standbys (replication.py)
    reads = Statements(config, guard)
    _, raw_select = store.statements(ident)
    cases: dict[str, Callable[[psycopg.Connection[Any]], object]] = {
        "spend raw": lambda c: c.execute("SELECT NULL::bytea").fetchone(),
        "spend genesis": lambda c: c.execute(genesis).fetchone(),
        "spend durable": lambda c: c.execute(durable).fetchone(),
        "spend full": lambda c: c.execute(full).fetchone(),
        "is_spent raw": lambda c: c.execute(raw_select, (NS, b"x")).fetchone(),
        # A read proves the genesis only, whether the ledger proves or not.
        "is_spent genesis": lambda c: c.execute(reads.is_spent, (NS, b"x")).fetchone(),
    }
    got: dict[str, list[float]] = {name: [] for name in cases}
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET synchronous_commit = off")
        for op in cases.values():  # warm up, and let psycopg prepare every statement
            for _ in range(20):
                op(conn)
        names = list(cases)
        for i in range(rounds):
            for name in names if i % 2 == 0 else names[::-1]:
                started = time.perf_counter_ns()
                for _ in range(calls):
                    cases[name](conn)
                got[name].append((time.perf_counter_ns() - started) / calls / 1e3)
    for name, times in got.items():
        base = got[name.split()[0] + " raw"]
        extra = statistics.median(a - b for a, b in zip(times, base, strict=True))
        print(f"{name:<18} {statistics.median(times):6.1f} us/call  vs raw {extra:+5.1f} us")


def server_cpu(url: str, rounds: int = 12, calls: int = 2000) -> None:
    """Server CPU per statement: the ledger's prepared spend against the raw INSERT."""
    import os

    own: Any = open_ledger(url, table="bench_server_cpu")
    body = own._st.spend_prepared.setup.split(b" AS ", 1)[1]
    own.close()
    raw = b'INSERT INTO "public"."bench_server_cpu" (namespace, request_id, token) '
    raw += b"VALUES ($1, $2, $3) ON CONFLICT (namespace, request_id) DO NOTHING"
    tick = os.sysconf("SC_CLK_TCK")

    def cpu(pid: int) -> float:
        stat = Path(f"/proc/{pid}/stat").read_text()
        fields = stat.rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / tick

    sides = {"raw": raw, "ledger": body}
    conns = {name: psycopg.connect(url, autocommit=True) for name in sides}
    try:
        for name, statement in sides.items():
            conns[name].execute(b"PREPARE p (bytea, bytea, bytea) AS " + statement)
        for spent in (True, False):
            got: dict[str, list[float]] = {name: [] for name in sides}
            for i in range(rounds):
                for name in list(sides) if i % 2 == 0 else list(sides)[::-1]:
                    pgconn, pid = conns[name].pgconn, conns[name].info.backend_pid
                    started = cpu(pid)
                    for _ in range(calls):
                        rid = b"spent" if spent else _rid(name)
                        pgconn.exec_prepared(b"p", [NS, rid, os.urandom(16)], [1, 1, 1])
                    got[name].append((cpu(pid) - started) / calls * 1e6)
            what = "spent id" if spent else "new id"
            ours, base = statistics.mean(got["ledger"]), statistics.mean(got["raw"])
            print(
                f"{what:<9} server cpu  ledger {ours:6.1f} us  raw {base:6.1f} us  "
                f"ledger-raw {ours - base:+5.1f} us"
            )
    finally:
        for conn in conns.values():
            conn.close()


def _set_fsync(url: str, off: bool) -> None:
    """Server-wide ``fsync`` for the per-call probe (needs a superuser)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET fsync = off" if off else "ALTER SYSTEM RESET fsync")
        conn.execute("SELECT pg_reload_conf()")


def main(argv: list[str]) -> int:
    if argv not in (["--per-call"], ["--guard-cost"], ["--server-cpu"]):
        print(__doc__)
        return 2
    with store.server() as url:
        if argv == ["--guard-cost"]:
            guard_cost(url)
            return 0
        if argv == ["--server-cpu"]:
            server_cpu(url)
            return 0
        _set_fsync(url, off=True)
        try:
            per_call(url)
        finally:
            _set_fsync(url, off=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
