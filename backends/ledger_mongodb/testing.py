"""Test and operations support for MongoDB ledgers; a ledger never imports this module."""

from __future__ import annotations

import re
from typing import Any

from ledger_core.errors import LedgerError, LedgerUnavailable
from ledger_core.opening import Route, reroute_address
from ledger_core.scratch import prefix_bounds, require_scratch_prefix, scratch_request
from ledger_core.urls import LedgerURL

from .options import parse


def remove_scratch_in(db: Any, collection: str, prefix: str) -> int:
    """The genesis documents of the namespaces named ``prefix...`` FIRST (a ledger still
    open on one fails closed before any record of it goes: a delete is not atomic across
    documents), then every other document whose ``ns`` starts with ``prefix`` (found by
    ``ns``, so a removal interrupted between the two still removes them); how many
    namespaces. ``db``: a PyMongo ``Database``."""
    from .aio import GENESIS_PREFIX, MAJORITY
    from .errors import check_write_concern, first_batch

    low, high = prefix_bounds(prefix)
    # Asked first: some servers (nx-27017) would create the collection to delete. They
    # also list every collection whatever the filter: matched by name again.
    listed = db.command({"listCollections": 1, "filter": {"name": collection}})
    if not any(entry.get("name") == collection for entry in first_batch(listed)):
        raise LedgerUnavailable(f"remove_scratch: no ledger collection {collection!r} here")
    removed = None
    for flt in (
        {"_id": {"$gte": GENESIS_PREFIX + low, "$lt": GENESIS_PREFIX + high}},
        {"ns": {"$regex": "^" + re.escape(prefix)}, "g": {"$exists": False}},
    ):
        delete = {"delete": collection, "deletes": [{"q": flt, "limit": 0}]}
        reply = db.command({**delete, "writeConcern": MAJORITY})
        check_write_concern(reply, "remove_scratch")
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

        checked = require_scratch_prefix(prefix)
        target = parse(scratch_request(url))
        client = _client(target, _pymongo().MongoClient)
        try:
            return remove_scratch_in(
                client.get_database(target.database), target.settings.collection, checked
            )
        except LedgerError:
            raise
        except Exception as exc:
            raise unavailable(f"remove_scratch on {target.location}", exc) from exc
        finally:
            client.close()


HOOKS = Hooks()
