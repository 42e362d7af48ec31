"""Move a ledger to a new store without letting any spent id read as unspent there.

A new store is a new ``store_id`` (C6), so requests minted under the old one resolve as
``ledger-changed`` (H5) and are asked again. ``migrate`` copies every spent id into the
target, verifies each one reads as spent there, and records the lineage (the old
``store_id``) as a spent marker in the target. It is idempotent: run it again after the
hosts have switched to catch ids spent in the old store meanwhile.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .errors import LedgerError
from .ids import MarkerKind, marker_id
from .protocol import DecisionLedger, store_id_of


@runtime_checkable
class ScannableLedger(Protocol):
    """A ledger that can list what it has spent: what a migration source must offer."""

    def spent_ids(self) -> Iterator[str]: ...


class MigrationError(LedgerError):
    """The copy could not be completed or verified; the target must not be used yet."""


@dataclass(frozen=True)
class MigrationReport:
    source_store_id: str | None
    target_store_id: str | None
    copied: int  # newly spent in the target by this run
    already_present: int  # spent in the target before (an earlier run, or a racing spend)
    verified: int  # read back as spent from the target
    lineage: str | None  # the source store_id recorded in the target (None: not recorded)


def lineage_marker(source_store_id: str) -> bytes:
    """The marker that records "this store continues ``source_store_id``".

    A marker, not an id: a request id can never collide with it, and listing the
    target's ids never shows it.
    """
    return marker_id(MarkerKind.LINEAGE, source_store_id)


def migrate(source: DecisionLedger, target: DecisionLedger) -> MigrationReport:
    """Copy every spent id from ``source`` into ``target``, verify, record the lineage."""
    if not isinstance(source, ScannableLedger):
        raise MigrationError(f"{type(source).__name__} cannot list its spent ids (spent_ids)")
    is_spent = getattr(target, "is_spent", None)
    if not callable(is_spent):
        raise MigrationError(f"{type(target).__name__} has no is_spent: the copy can't be verified")
    source_id, target_id = store_id_of(source), store_id_of(target)
    if target_id is not None and target_id == source_id:
        raise MigrationError("source and target are the same store (equal store_id)")

    copied = already = 0
    for request_id in source.spent_ids():  # streamed: memory stays flat for any size
        result = target.spend(request_id)
        if result is True:
            copied += 1
        elif result is False:
            already += 1
        else:
            raise MigrationError(f"target answered {result!r} to spend: not a bool")
        if is_spent(request_id) is not True:  # trust, but verify: a target that forgets fails here
            raise MigrationError(f"id {request_id!r} does not read as spent in the target")
    lineage = _record_lineage(target, source_id)
    return MigrationReport(source_id, target_id, copied, already, copied + already, lineage)


def _record_lineage(target: object, source_id: str | None) -> str | None:
    """Spend the lineage marker in the target, where it has a marker space."""
    spend_marker = getattr(target, "spend_marker", None)
    is_marker_spent = getattr(target, "is_marker_spent", None)
    if source_id is None or not callable(spend_marker) or not callable(is_marker_spent):
        return None
    marker = lineage_marker(source_id)
    spend_marker(marker)
    if is_marker_spent(marker) is not True:
        raise MigrationError("the lineage marker does not read as spent in the target")
    return source_id
