"""A failover never turns a spent id back into an unspent one under the same store_id.

The replica's replication link runs through a relay that stops forwarding (the primary
still counts a connected replica), 300 ids are spent, the primary is killed (-9) and the
replica promoted (``REPLICAOF NO ONE``, a Sentinel failover, a Cluster takeover). Then,
wherever the store answers with the store_id the spends were proven under, every one of
them is still spent; an instance opened before either follows with the same answers or
fails closed.
"""

from __future__ import annotations

import pytest

from ledger_core import open_ledger
from ledger_core.errors import LedgerError
from tests.servers import redis as servers

IDS = [f"spent-{i}" for i in range(300)]


def assert_kept(ledger: object, store_id: str | None, spent: list[str]) -> None:
    """Under ``store_id``, every id in ``spent`` is spent and never answers True again."""
    assert store_id is not None
    opened = getattr(ledger, "store_id")  # noqa: B009
    if opened != store_id:
        return  # another store: hosts ask again (H5)
    lost = [i for i in spent if not ledger.is_spent(i)]  # type: ignore[attr-defined]
    again = [i for i in spent if ledger.spend(i)]  # type: ignore[attr-defined]
    assert not lost and not again, f"{len(lost)} read unspent, {len(again)} True again under {store_id}"


def spend_all(ledger: object) -> None:
    assert all(ledger.spend(i) for i in IDS)  # type: ignore[attr-defined]


def test_partition_then_failover_to_the_replica() -> None:
    try:
        cm = servers.local_replicated()
        pair = cm.__enter__()
    except servers.ServerUnavailable as exc:
        pytest.skip(str(exc))
    try:
        with open_ledger(pair.primary.url, namespace="failover") as first:
            proven = first.store_id
            pair.partition()
            spend_all(first)
        pair.promote()
        with open_ledger(pair.replica.url, namespace="failover") as after:
            assert_kept(after, proven, IDS)
    finally:
        cm.__exit__(None, None, None)
