"""Ledgers for C6 opening (issue 37): ``create=false`` on a store that does not exist.

``creates_on_open`` says it honours ``LedgerContext.create`` and opens anyway, writing
the store's genesis (a mistyped path or namespace reads "not spent"): only
``test_C6_open_missing`` catches it. ``explicit`` is its control: the zoo's base ledger
that refuses a store without its genesis key under ``create=false``, writing nothing.
``EXPECTED`` and ``ONLY_CAUGHT_BY`` have the shape of ``tests.zoo.mutants``'s.
"""

from __future__ import annotations

from typing import Any

import redis

from ledger_conformance import LedgerContext, offers_create
from ledger_core.errors import LedgerUnavailable, missing_store

from .base import TIMEOUT, ZooLedger, build


class Explicit(ZooLedger):
    """Correct: with ``create=False`` a store without its genesis key is refused."""

    def __init__(self, label: str, host: str, port: int, create: bool = True) -> None:
        if not create:
            probe = redis.Redis(host=host, port=port, socket_timeout=TIMEOUT)
            try:
                found = probe.exists(f"zoo-id:{label.encode().hex()}")
            except redis.RedisError as exc:
                raise LedgerUnavailable(f"zoo redis unreachable: {exc}") from exc
            finally:
                probe.close()
            if not found:
                raise missing_store(f"zoo store {label!r}")
        super().__init__(label, host, port)


@offers_create
def explicit(ctx: LedgerContext) -> Any:
    return build(Explicit, ctx, create=ctx.create is not False)


@offers_create
def creates_on_open(ctx: LedgerContext) -> Any:
    """Offers ``create`` and ignores it: the base ledger writes its genesis on open."""
    return build(ZooLedger, ctx)


EXPECTED: dict[str, tuple[str, str, str]] = {
    "creates_on_open": ("C6", "C6_open_missing", "quick"),
}
ONLY_CAUGHT_BY: dict[str, str] = {
    "creates_on_open": "not C6_open_missing",
}
CONTROL = ("control:opening", "tests.zoo.opening:explicit", "C6_open_missing")
