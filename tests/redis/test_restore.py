"""A Redis namespace restored from a backup (its keys put back with ``RESTORE``), and
``reidentify`` (C6), standalone and on a Cluster."""

from __future__ import annotations

import pytest

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
