"""Attempt tokens never repeat, across threads and forked processes (C5 rests on it)."""

from __future__ import annotations

import multiprocessing
import threading
from typing import Any

from ledger_core.tokens import TOKEN_BYTES, attempt_outcome, new_token


def _child(out: Any) -> None:
    out.put([new_token() for _ in range(1000)])


def test_tokens_are_unique_across_threads_and_forks() -> None:
    seen: list[bytes] = []
    lock = threading.Lock()

    def worker() -> None:
        mine = [new_token() for _ in range(2000)]
        with lock:
            seen.extend(mine)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ctx = multiprocessing.get_context("fork")
    out: Any = ctx.Queue()
    procs = [ctx.Process(target=_child, args=(out,)) for _ in range(3)]
    for p in procs:
        p.start()
    for _ in procs:
        seen.extend(out.get(timeout=60))
    for p in procs:
        p.join(timeout=30)
    assert all(len(t) == TOKEN_BYTES for t in seen)
    assert len(set(seen)) == len(seen) == 8 * 2000 + 3 * 1000


def test_attempt_outcome() -> None:
    ours = new_token()
    assert attempt_outcome(ours, ours) is True
    assert attempt_outcome(new_token(), ours) is False
    assert attempt_outcome(None, ours) is None
