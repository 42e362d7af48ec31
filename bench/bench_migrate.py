"""``migrate`` end to end: SQLite -> PostgreSQL, 200,000 ids (issue 13).

Run: ``python -m bench.bench_migrate [N]`` (starts its own PostgreSQL like the tests
do, or uses ``LEDGER_TEST_POSTGRES_URL``). Prints ids/s for a first copy, then for a
re-run over a target that already holds every id (a resume: reads only). Before issue
13 the copy was one spend and one read per id: about 2,100 ids/s on this machine.
"""

from __future__ import annotations

import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from ledger_core import migrate, open_ledger
from ledger_sqlite import SQLiteLedger
from tests.servers.postgres import postgres_server


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    with tempfile.TemporaryDirectory() as tmp, postgres_server() as server:
        source = SQLiteLedger(Path(tmp) / "old.db")
        ids = [f"request-{uuid.uuid4()}" for _ in range(count)]
        for i in range(0, count, 10_000):
            source.spend_many(ids[i : i + 10_000])
        table = f"bench_migrate_{uuid.uuid4().hex[:8]}"
        target: Any = open_ledger(server.url, table=table)
        try:
            for label in ("first copy", "re-run (all present)"):
                start = time.perf_counter()
                report = migrate(source, target)
                took = time.perf_counter() - start
                print(
                    f"{label:<22} {report.verified:>8,} ids in {took:6.2f} s = "
                    f"{report.verified / took:>9,.0f} ids/s (copied {report.copied:,})"
                )
        finally:
            target.close()
            source.close()


if __name__ == "__main__":
    main()
