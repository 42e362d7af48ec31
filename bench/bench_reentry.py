"""What re-entry (C10) costs a host: ``resolve`` with an attempt key against without one.

python -m bench.bench_reentry [--ops N] [--rounds R]

Memory: ``spend_as`` (one locked step plus a SHA-256) against ``spend``. SQLite: the
``MarkerReentry`` wrapper (the id, then the winner marker: two fsync'd writes on a win)
against a plain ``spend``; a native one-round-trip ``spend_as`` would remove the second.
"""

from __future__ import annotations

import argparse
import os
import tempfile

from bench.harness import Comparison, compare
from ledger_core import MarkerReentry, MemoryLedger, PendingRequest, resolve
from ledger_sqlite import SQLiteLedger

KEY = "attempt-key-for-the-bench-0123456789"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ops", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()

    def fresh(side: str, r: int) -> list[str]:
        return [f"{side}-{r}-{i}" for i in range(args.ops)]

    def again(side: str, r: int) -> list[str]:
        return [f"{side}-{r % 2}-{i}" for i in range(args.ops)]

    results: list[Comparison] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, ledger in (
            ("memory", MemoryLedger()),
            ("sqlite", SQLiteLedger(os.path.join(tmp, "l.db"))),  # native spend_as
            ("sqlite+markers", MarkerReentry(SQLiteLedger(os.path.join(tmp, "m.db")))),
        ):
            store = ledger.store_id

            def keyed(request_id: str, ledger: object = ledger, store: object = store) -> object:
                pending = PendingRequest(request_id, store)  # type: ignore[arg-type]
                return resolve(ledger, pending, approved=True, attempt_key=KEY)

            def plain(request_id: str, ledger: object = ledger, store: object = store) -> object:
                return resolve(ledger, PendingRequest(request_id, store), approved=True)  # type: ignore[arg-type]

            results.append(compare(f"{name} resolve, new id", keyed, plain, fresh, args.rounds))
            results.append(
                compare(f"{name} resolve, re-entry vs spent", keyed, plain, again, args.rounds)
            )
    print(f"ops per round {args.ops}, rounds {args.rounds}; ratio = with key / without")
    for result in results:
        print(result.line())


if __name__ == "__main__":
    main()
