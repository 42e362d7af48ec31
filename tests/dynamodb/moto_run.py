"""The conformance suite against moto's server mode: a recorded comparison, not a CI gate.

    pytest --pyargs ledger_conformance --ledger-factory tests.dynamodb.moto_run:factory

moto keeps everything in memory and was found not atomic under contention, so its
results are recorded in docs/dynamodb.md, never required.
"""

from __future__ import annotations

import atexit
from typing import Any

from ledger_conformance import LedgerContext
from tests.dynamodb import tools
from tests.servers import dynamodb as servers

_server: servers.LocalServer | None = None


def _url() -> str:
    global _server
    if _server is None:
        manager = servers.local_moto()
        _server = manager.__enter__()
        atexit.register(manager.__exit__, None, None, None)
    return _server.url("decision-ledger-moto")


def factory(ctx: LedgerContext) -> Any:
    return tools.factory(_url(), prefix="moto")(ctx)
