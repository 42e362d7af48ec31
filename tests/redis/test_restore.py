"""A Redis namespace restored from a backup (its keys put back with ``RESTORE``), and
``reidentify`` (C6), standalone and on a Cluster."""

from __future__ import annotations

import pytest

from ledger_core.errors import UnsafeStoreConfig
from tests.flavors import Flavored
from tests.redis.test_conformance_redis import Restore, namespace_of
from tests.restoring import restore_goes_unseen, restored_then_reidentified


@pytest.fixture(params=["standalone", "cluster"])
def restored(request: pytest.FixtureRequest) -> tuple[str, Restore]:
    if request.param == "cluster":
        url: str = request.getfixturevalue("cluster_url")
        return url, Restore(url, cluster=True)
    url = request.getfixturevalue("redis_url")
    return url, Restore(url)


def test_a_restored_namespace_keeps_its_store_id_until_reidentified(
    restored: tuple[str, Restore], namespace: str
) -> None:
    url, restore = restored
    restore_goes_unseen(url, namespace_of(namespace), restore, namespace)


def test_a_restored_namespace_fails_closed_once_reidentified(
    restored: tuple[str, Restore], namespace: str
) -> None:
    url, restore = restored
    restored_then_reidentified(url, namespace_of(namespace), restore, namespace)


@pytest.mark.parametrize("flavor", ["sync", "async"])
def test_reidentify_fails_every_instance_closed_in_both_flavours(
    flavor: str, redis_url: str, namespace: str
) -> None:
    """The async ledger reidentifies as the sync one does (C9): a fresh genesis over the
    one proven, every open instance then failed for good, a new one another store_id."""
    with (
        Flavored(flavor, redis_url, namespace=namespace) as ledger,
        Flavored(flavor, redis_url, namespace=namespace) as other,
    ):
        assert ledger.spend("before") is True
        before = ledger.store_id
        ledger.run(ledger.ledger.reidentify())
        for instance in (ledger, other):
            with pytest.raises(UnsafeStoreConfig):
                instance.is_spent("before")
        with Flavored(flavor, redis_url, namespace=namespace) as fresh:
            assert fresh.store_id not in (None, before)
            assert fresh.is_spent("before") is True  # the records stay; the identity moved
