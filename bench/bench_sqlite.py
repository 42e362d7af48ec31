"""SQLite and memory ledgers against the raw ``INSERT OR IGNORE`` in the same run.

python -m bench.bench_sqlite [--ops N] [--rounds R]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import tempfile
import time

from bench.harness import Comparison, compare
from ledger_core import MemoryLedger
from ledger_sqlite import SQLiteLedger
from ledger_sqlite import commands as schema

RAW_INSERT = (
    "INSERT OR IGNORE INTO decision_ledger (namespace, request_id, token, spent_at) "
    "VALUES (?, ?, ?, ?)"
)
RAW_SELECT = "SELECT 1 FROM decision_ledger WHERE namespace = ? AND request_id = ?"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ops", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        ledger = SQLiteLedger(os.path.join(tmp, "ledger.db"))
        raw = sqlite3.connect(os.path.join(tmp, "raw.db"), isolation_level=None)
        raw.execute("PRAGMA journal_mode=WAL")
        raw.execute("PRAGMA synchronous=FULL")
        for statement in schema.SCHEMA:  # the same table, so only our code differs
            raw.execute(statement)
        token = os.urandom(16)

        def raw_spend(request_id: str) -> object:
            args_ = ("default", request_id.encode(), token, time.time())
            return raw.execute(RAW_INSERT, args_).rowcount == 1

        def raw_is_spent(request_id: str) -> object:
            return raw.execute(RAW_SELECT, ("default", request_id.encode())).fetchone()

        def fresh(side: str, r: int) -> list[str]:
            return [f"{side}-{r}-{i}" for i in range(args.ops)]

        def spent(side: str, r: int) -> list[str]:
            return [f"{side}-{r % 2}-{i}" for i in range(args.ops)]

        results: list[Comparison] = [
            compare("sqlite spend (new id, fsync)", ledger.spend, raw_spend, fresh, args.rounds),
            compare("sqlite spend (already spent)", ledger.spend, raw_spend, spent, args.rounds),
            compare("sqlite is_spent", ledger.is_spent, raw_is_spent, spent, args.rounds),
        ]
        memory = MemoryLedger()
        seen: set[str] = set()
        results.append(
            compare("memory spend vs set.add", memory.spend, seen.add, fresh, args.rounds)
        )
        ledger.close()
        raw.close()
    print(f"ops per round {args.ops}, rounds {args.rounds}; ratio = ours / raw throughput")
    for result in results:
        print(result.line())


if __name__ == "__main__":
    main()
