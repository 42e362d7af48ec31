"""Test and operations support for MongoDB ledgers; a ledger never imports this module."""

from __future__ import annotations

import re
from collections.abc import Generator
from typing import Any

from ledger_core.errors import LedgerError, LedgerUnavailable
from ledger_core.opening import Route, reroute_address
from ledger_core.scratch import prefix_bounds, require_scratch_prefix, scratch_request
from ledger_core.steps import run_steps
from ledger_core.urls import LedgerURL

from .options import parse


def remove_scratch_steps(collection: str, prefix: str) -> Generator[Any, Any, int]:
    """The genesis documents of the namespaces named ``prefix...`` FIRST (a ledger still
    open on one fails closed before any record of it goes: a delete is not atomic across
    documents), then every other document whose ``ns`` starts with ``prefix`` (found by
    ``ns``, so a removal interrupted between the two still removes them); how many
    namespaces."""
    from .commands import genesis_key, write
    from .decisions import _listed, _raise_write_concern

    low, high = prefix_bounds(prefix)
    if not (yield from _listed(collection)):
        # Asked first: some servers (nx-27017) would create the collection to delete.
        raise LedgerUnavailable(f"remove_scratch: no ledger collection {collection!r} here")
    removed = None
    for flt in (
        {"_id": {"$gte": genesis_key(low), "$lt": genesis_key(high)}},
        {"ns": {"$regex": "^" + re.escape(prefix)}, "g": {"$exists": False}},
    ):
        reply = yield write(
            [("delete", collection), ("deletes", [{"q": flt, "limit": 0}])], "remove_scratch"
        )
        _raise_write_concern(reply, "remove_scratch")
        failures = reply.get("writeErrors") or []
        if failures:
            codes = sorted({f.get("code") for f in failures}, key=str)
            raise LedgerUnavailable(f"MongoDB remove_scratch: the delete failed {codes}")
        removed = int(reply.get("n", 0)) if removed is None else removed
    return removed or 0


class Hooks:
    def reroute(self, url: LedgerURL, route: Route) -> str | None:
        """One host:port (``mongodb+srv://`` names a DNS record of many: none)."""
        return None if url.scheme == "mongodb+srv" else reroute_address(url, route, 27017)

    def remove_scratch(self, url: LedgerURL, prefix: str) -> int:
        from .backend import _client, _pymongo  # the driver: reroute needs none
        from .errors import unavailable
        from .ledger import SyncConnection

        checked = require_scratch_prefix(prefix)
        target = parse(scratch_request(url))
        conn = SyncConnection(_client(target, _pymongo().MongoClient), target.database, owned=True)
        try:
            return run_steps(
                remove_scratch_steps(target.settings.collection, checked), conn.perform
            )
        except LedgerError:
            raise
        except Exception as exc:
            raise unavailable(f"remove_scratch on {target.location}", exc) from exc
        finally:
            conn.close()


HOOKS = Hooks()
