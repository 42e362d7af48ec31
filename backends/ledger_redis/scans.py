"""A ``SCAN`` listing's pages judged without I/O: ``spent_ids``, ``namespaces``, a
marker kind's subjects. The ledger performs each page (``page`` in ``aio.py``)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from ledger_core.errors import InvalidLedgerURL, LedgerUnavailable, UnsafeStoreConfig
from ledger_core.ids import is_marker, marker_range, marker_subject, validate_namespace

from .commands import Command, Keys, Plan, glob_escape, namespace_of, scan_command


class Scan:
    """A ``SCAN`` over every master. It may return a key twice (a rehash), so each
    listed item's 16-byte digest is kept for the scan, never the items themselves."""

    what = "scan"

    def __init__(self, pattern: bytes, count: int, proof: Command | None) -> None:
        if count < 1:
            raise ValueError("count must be at least 1")
        self.pattern, self.count, self.proof = pattern, count, proof
        self.nodes: list[Any] | None = None  # the masters left to scan, this one first
        self._cursor = 0
        self._started = False
        self._seen: set[bytes] = set()

    def next_command(self) -> Command | None:
        """The ``SCAN`` of the next page on ``nodes[0]``, or ``None``: every master done."""
        nodes = self.nodes
        if nodes is None:
            raise RuntimeError("the masters to scan are not known yet")
        if self._started and self._cursor == 0:
            nodes.pop(0)
            self._started = False
        if not nodes:
            return None
        self._started = True
        return scan_command(self._cursor, self.pattern, self.count)

    def take(self, proved: Any, cursor: Any, keys: Sequence[Any]) -> list[str]:
        if self.proof is not None and proved != 1:  # a failed proof raised IdentityLost
            raise LedgerUnavailable(f"{self.what}: unexpected identity proof reply {proved!r:.60}")
        if isinstance(cursor, bytes) and cursor.isdigit():
            cursor = int(cursor)
        if not isinstance(cursor, int) or cursor < 0:
            raise LedgerUnavailable(f"{self.what}: SCAN answered cursor {cursor!r}")
        self._cursor = cursor
        out: list[str] = []
        for key in keys:
            if not isinstance(key, bytes):
                raise LedgerUnavailable(f"{self.what}: SCAN answered a {type(key).__name__}")
            item = self.keep(key)
            if item is None:
                continue
            digest = hashlib.blake2b(item.encode("utf-8"), digest_size=16).digest()
            if digest not in self._seen:
                self._seen.add(digest)
                out.append(item)
        return out

    def keep(self, key: bytes) -> str | None:
        raise NotImplementedError


class Listing(Scan):
    """``spent_ids`` (or one marker kind's subjects): the identity proof follows each
    page, never precedes it: a store that forgot after a proof would answer an empty
    page as if it were the end."""

    what = "spent_ids"

    def __init__(self, plan: Plan, count: int, marker_kind: str | None = None) -> None:
        self._kind = marker_kind
        self._marker = b"" if marker_kind is None else marker_range(marker_kind)[0]
        self._prefix = plan.keys.record_prefix
        pattern = glob_escape(self._prefix + self._marker) + b"*"
        super().__init__(pattern, count, plan.proof_command)

    def keep(self, key: bytes) -> str | None:
        if not key.startswith(self._prefix):
            # MATCH returned something outside the prefix: refuse to guess.
            raise LedgerUnavailable(f"spent_ids: SCAN answered a foreign key {key!r:.80}")
        raw = key[len(self._prefix) :]
        if self._kind is not None:
            return marker_subject(self._kind, raw) if raw.startswith(self._marker) else None
        if is_marker(raw):
            return None
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise UnsafeStoreConfig(
                f"spent_ids: record key {key!r:.80} holds no UTF-8 id: something else "
                "wrote it; refusing to guess"
            ) from None


class NamespaceScan(Scan):
    """``namespaces()``: genesis keys are all there is to scan (every spend proves one)."""

    what = "namespaces"

    def __init__(self, keys: Keys, count: int) -> None:
        self._keys = keys
        super().__init__(keys.genesis_pattern, count, None)

    def keep(self, key: bytes) -> str | None:
        name = namespace_of(key, self._keys.cluster)
        if name is None:
            if self._keys.cluster:
                return None  # a look-alike no ledger of this layout reads: not ours
            raise LedgerUnavailable(f"namespaces: SCAN answered a foreign key {key!r:.80}")
        try:
            return validate_namespace(name.decode("utf-8"))
        except (UnicodeDecodeError, InvalidLedgerURL):
            raise UnsafeStoreConfig(
                f"namespaces: genesis key {key!r:.80} names no valid namespace: something "
                "else wrote it; refusing to guess"
            ) from None
