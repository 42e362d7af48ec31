"""Test and operations support for ``dynamodb://`` URLs; a ledger never imports this."""

from __future__ import annotations

import re
import time
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from ledger_core.errors import LedgerUnavailable
from ledger_core.ids import MAX_NAMESPACE_BYTES
from ledger_core.lazy import import_driver
from ledger_core.opening import OpenRequest, Route, routed_address
from ledger_core.scratch import require_scratch_prefix
from ledger_core.urls import LedgerURL

from . import items
from .errors import fail
from .items import KEY, SCAN_SEGMENTS, binary
from .options import parse

_ENDPOINT_START = re.compile(r"(?i)(https?)(?:://|%3A%2F%2F)")
_AUTHORITY_END = re.compile(r"(?i)[/?#]|%2F|%3F|%23")
_DEFAULT_PORTS = {"http": 80, "https": 443}

# Prefixes per Scan filter, OR'd, one per namespace length (``begins_with(#k, :p119) OR ``
# is 24 characters: 2.9 KB, below the 4 KB expression limit; two Scans cover every
# length), BatchWriteItem's 25 deletes per call, and how often its unprocessed items are
# sent again.
LENGTHS_PER_SCAN = 120
DELETES_PER_BATCH = 25
UNPROCESSED_ATTEMPTS = 8


def _reroute_endpoint(value: str, route: Route) -> str | None:
    """An ``endpoint_url`` value as written in the query (percent-encoded or not) with
    its host:port sent through ``route``; every other byte kept."""
    scheme = _ENDPOINT_START.match(value)
    if scheme is None:
        return None
    start = scheme.end()
    end = _AUTHORITY_END.search(value, start)
    stop = len(value) if end is None else end.start()
    written = value[start:stop]
    authority = unquote(written)
    try:
        parts = urlsplit(f"//{authority}")
    except ValueError:
        return None
    default = _DEFAULT_PORTS[scheme.group(1).lower()]
    shown = None if "@" in authority else routed_address(parts, route, default)
    if shown is None:
        return None
    if "%" in written:  # written encoded: encode ours alike
        shown = quote(shown, safe="")
    return value[:start] + shown + value[stop:]


def record_prefixes(prefix: str) -> list[bytes]:
    """Where every record key of every namespace named ``prefix...`` starts, and no
    other's: keys are length-prefixed (``b"<n>:<namespace>:<id>"``), one per length."""
    raw = prefix.encode("utf-8")
    return [b"%d:%s" % (n, raw) for n in range(max(len(raw), 1), MAX_NAMESPACE_BYTES + 1)]


def remove_namespaces(client: Any, table: str, location: str, prefix: str) -> int:
    """Delete the namespaces named ``prefix...`` (checked): their genesis items FIRST,
    so a ledger still open on one fails closed before any record of it goes (a Scan
    page of records deleted before its genesis would read as unspent under the old
    ``store_id``: docs/dynamodb.md), then every record and marker under them, found by
    key, so a removal interrupted after the genesis items still finds what is left."""
    genesis = _sweep(client, table, location, [items.genesis_key(prefix)], delete=False)
    _delete(client, table, location, genesis)
    prefixes = record_prefixes(prefix)
    for i in range(0, len(prefixes), LENGTHS_PER_SCAN):
        _sweep(client, table, location, prefixes[i : i + LENGTHS_PER_SCAN], delete=True)
    return len(genesis)


def _sweep(
    client: Any, table: str, location: str, prefixes: list[bytes], *, delete: bool
) -> list[bytes]:
    """Every key under ``prefixes``, each page deleted when ``delete``, else returned."""
    found: list[bytes] = []
    for segment in range(SCAN_SEGMENTS):
        start: dict[str, Any] | None = None
        while True:
            try:
                answer = client.scan(**items.scan(table, prefixes, segment, start))
            except Exception as exc:
                fail(exc, "remove_scratch Scan", location)
            keys = [
                key
                for item in answer.get("Items") or []
                if (key := binary(item, KEY)) is not None
                and any(key.startswith(p) for p in prefixes)
            ]
            if delete:
                _delete(client, table, location, keys)
            else:
                found += keys
            start = answer.get("LastEvaluatedKey")
            if not (isinstance(start, dict) and start):
                break
    return found


def _delete(client: Any, table: str, location: str, keys: list[bytes]) -> None:
    """Delete ``keys`` in batches; unprocessed items are sent again (backing off), then
    it fails (never silently)."""
    for i in range(0, len(keys), DELETES_PER_BATCH):
        requests = [
            {"DeleteRequest": {"Key": {KEY: {"B": k}}}} for k in keys[i : i + DELETES_PER_BATCH]
        ]
        for attempt in range(UNPROCESSED_ATTEMPTS):
            try:
                answer = client.batch_write_item(RequestItems={table: requests})
            except Exception as exc:
                fail(exc, "remove_scratch BatchWriteItem", location)
            requests = (answer.get("UnprocessedItems") or {}).get(table) or []
            if not requests:
                break
            time.sleep(min(0.05 * 2**attempt, 1.0))
        else:
            raise LedgerUnavailable(
                f"DynamoDB remove_scratch on {location}: {len(requests)} deletes still "
                f"unprocessed after {UNPROCESSED_ATTEMPTS} attempts"
            )


class _Hooks:
    def reroute(self, url: LedgerURL, route: Route) -> str | None:
        """The URL with its ``endpoint_url``'s host:port sent through ``route``, the rest
        byte for byte; ``None`` without an endpoint in the URL (AWS picks the host)."""
        head, _, rest = url.raw.partition("?")
        query, hash_, fragment = rest.partition("#")
        segments = query.split("&")
        for i, segment in enumerate(segments):
            key, eq, value = segment.partition("=")
            if not eq or unquote(key) != "endpoint_url":
                continue
            routed = _reroute_endpoint(value, route)
            if routed is None:
                return None
            segments[i] = f"{key}={routed}"
            return f"{head}?{'&'.join(segments)}{hash_}{fragment}"
        return None

    def remove_scratch(self, url: LedgerURL, prefix: str) -> int:
        """Delete every item of the namespaces named ``prefix...`` (a scratch prefix, else
        refused before any I/O); how many. A missing table is an error, never created."""
        checked = require_scratch_prefix(prefix)
        target = parse(OpenRequest.build(url, create=False))
        boto3 = import_driver("dynamodb", "the DynamoDB ledger needs boto3", "boto3")
        session = boto3.session.Session(profile_name=target.profile)
        try:
            client = session.client("dynamodb", **target.client_kwargs())
        except Exception as exc:
            fail(exc, "client setup", target.location)
        try:
            return remove_namespaces(client, target.table, target.location, checked)
        finally:
            client.close()


HOOKS = _Hooks()
