"""Ledgers that C6's restore clause alone catches, and its control. Each runs on this
process's own redis-server (``restartable``) with its forget hook, and a restore hook
that snapshots one store's keys (``DUMP``) and restores them (``RESTORE ... REPLACE``
after deleting what is there), genesis included, as a restore of a backup does.

- ``keeps_identity_on_restore``: the correct zoo ledger with no after-restore step: the
  restored genesis is the old one, so old and new instances answer under the old
  ``store_id`` for a store that lost every spend since the snapshot;
- ``reidentify_unseen``: its after-restore step writes a fresh genesis, but its spends
  and reads prove only that a genesis exists (a forget deletes it: caught), so instances
  opened before keep trusting the identity they read at open;
- ``reidentified``: the control, the correct ledger with the fresh genesis step.
"""

from __future__ import annotations

import uuid
from typing import Any

import redis

from ledger_conformance import LedgerContext

from . import restartable
from .base import ZooLedger

# Proves a genesis is there, not that it is the one opened.
EXISTS_GUARD = "if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end\n"


class ProvesAnyGenesis(ZooLedger):
    def run_script(self, script: str, keys: list[str], args: list[Any]) -> Any:
        if script.startswith("if redis.call('GET', KEYS[1]) ~= ARGV[1]"):
            script = EXISTS_GUARD + script.split("\n", 1)[1]
        return super().run_script(script, keys, args)


def _client() -> redis.Redis:
    host, port = restartable.own_address()
    return redis.Redis(host=host, port=port, socket_timeout=10.0)


def _keys(client: redis.Redis, label: str) -> list[bytes]:
    hexed = label.encode().hex()
    found = list(client.scan_iter(match=f"zoo:{hexed}:*", count=1000))
    return [*found, *([f"zoo-id:{hexed}".encode()] if client.exists(f"zoo-id:{hexed}") else [])]


class _Restoring:
    """A factory with a restore hook (and, with ``step``, an after-restore step that
    gives the store a fresh genesis)."""

    def __init__(self, cls: type[Any], name: str, step: bool) -> None:
        self.cls = cls
        self.__name__ = self.__qualname__ = name
        self.snapshots: dict[str, list[tuple[bytes, Any]]] = {}
        if step:
            self.ledger_after_restore = self._reidentify

    def __call__(self, ctx: LedgerContext) -> Any:
        return restartable.open_own(self.cls, ctx)

    def ledger_forget(self, namespace: str | None = None) -> None:
        restartable.forget(namespace)

    def ledger_restore(self, phase: str, label: str) -> None:
        client = _client()
        try:
            keys = _keys(client, label)
            if phase == "snapshot":
                self.snapshots[label] = [(key, client.dump(key)) for key in keys]
                return
            if keys:
                client.delete(*keys)
            for key, value in self.snapshots.pop(label):
                client.restore(key, 0, value, replace=True)
        finally:
            client.close()

    def _reidentify(self, label: str) -> None:
        client = _client()
        try:
            client.set(f"zoo-id:{label.encode().hex()}", uuid.uuid4().hex, xx=True)
        finally:
            client.close()


keeps_identity_on_restore = _Restoring(ZooLedger, "keeps_identity_on_restore", step=False)
reidentify_unseen = _Restoring(ProvesAnyGenesis, "reidentify_unseen", step=True)
reidentified = _Restoring(ZooLedger, "reidentified", step=True)

# factory name -> (clause the suite must fail, -k selection, profile)
EXPECTED: dict[str, tuple[str, str, str]] = {
    "keeps_identity_on_restore": ("C6", "C6_restore", "quick"),
    "reidentify_unseen": ("C6", "C6_restore", "quick"),
}
# factory name -> the suite without its clause (it must pass)
ONLY_CAUGHT_BY: dict[str, str] = {
    "keeps_identity_on_restore": "not C6_restore",
    "reidentify_unseen": "not C6_restore",
}
