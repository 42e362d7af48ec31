"""``migrate`` end to end: SQLite -> PostgreSQL, 50,000 ids, three targets in one run.

Run: ``python -m bench.bench_migrate [N]`` (starts its own PostgreSQL like the tests do,
or uses ``LEDGER_TEST_POSTGRES_URL``). Times, each in a table of its own:

- **fresh**: the first copy into a table that was just created (what every user's first
  migration is);
- **warm**: the same ids into another namespace of a table that already holds them;
- **re-run**: the fresh target again, every id already there (a resume: reads only);
- **raw**: the driver's own multi-row ``INSERT ... SELECT unnest(...) ON CONFLICT DO
  NOTHING`` of the same ids, 1,000 a statement, into a fresh plain table: the ratio
  says what the ledger's guard, read-back and markers cost on top.
"""

from __future__ import annotations

import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg

from ledger_core import migrate, open_ledger
from ledger_sqlite import SQLiteLedger
from tests.servers.postgres import postgres_server


def _timed(label: str, source: Any, target: Any) -> float:
    start = time.perf_counter()
    report = migrate(source, target)
    took = time.perf_counter() - start
    rate = report.verified / took
    print(
        f"{label:<28} {report.verified:>7,} ids in {took:6.2f} s = {rate:>9,.0f} ids/s "
        f"(copied {report.copied:,})",
        flush=True,
    )
    return rate


def _raw(url: str, ids: list[str]) -> float:
    table = f"bench_raw_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            f"CREATE TABLE {table} (namespace bytea NOT NULL, request_id bytea NOT NULL, "
            "PRIMARY KEY (namespace, request_id))"
        )
        raws = [i.encode() for i in ids]
        start = time.perf_counter()
        for i in range(0, len(raws), 1000):
            conn.execute(
                f"INSERT INTO {table} SELECT 'ns'::bytea, u FROM unnest(%s::bytea[]) AS u "
                "ON CONFLICT DO NOTHING",
                (raws[i : i + 1000],),
            )
        took = time.perf_counter() - start
        conn.execute(f"DROP TABLE {table}")
    rate = len(ids) / took
    label = "raw driver INSERT (fresh)"
    print(f"{label:<28} {len(ids):>7,} ids in {took:6.2f} s = {rate:>9,.0f} ids/s")
    return rate


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 50_000
    with tempfile.TemporaryDirectory() as tmp, postgres_server() as server:
        source = SQLiteLedger(Path(tmp) / "old.db")
        ids = [f"request-{uuid.uuid4()}" for _ in range(count)]
        for i in range(0, count, 10_000):
            source.spend_many(ids[i : i + 10_000])
        raw = _raw(server.url, ids)
        table = f"bench_migrate_{uuid.uuid4().hex[:8]}"
        fresh: Any = open_ledger(server.url, table=table)
        warm: Any = None
        try:
            rate = _timed("first copy, fresh table", source, fresh)
            _timed("re-run (all present)", source, fresh)
            warm = open_ledger(server.url, table=table, namespace="warm")
            _timed("first copy, warm table", source, warm)
            print(f"fresh table / raw driver: {rate / raw:.2f}")
        finally:
            for ledger in (fresh, warm):
                if ledger is not None:
                    ledger.close()
            source.close()


if __name__ == "__main__":
    main()
