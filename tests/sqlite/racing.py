"""Forked processes released together by a barrier (no sleeps): the process races."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from typing import Any

Racer = Callable[[int, Any, Any], None]  # (n, barrier, out): wait, race, out.put(result)


def in_processes(racer: Racer, count: int) -> list[Any]:
    """Run ``racer`` in ``count`` forked processes; what each put, in arrival order."""
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(count)
    out: Any = ctx.Queue()
    procs = [ctx.Process(target=racer, args=(n, barrier, out)) for n in range(count)]
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    return results
