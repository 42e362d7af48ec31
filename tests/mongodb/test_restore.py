"""A MongoDB collection restored from an export (``delete_many({})`` and ``insert_many``
of the earlier documents: the collection and its UUID stay), and ``reidentify`` (C6)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.mongodb.test_conformance_mongodb import Restore
from tests.restoring import restore_goes_unseen, restored_then_reidentified
from tests.servers import mongodb as servers


@pytest.mark.parametrize("check", [restore_goes_unseen, restored_then_reidentified])
def test_a_collection_restored_from_an_export(
    check: Callable[..., None], mongo: servers.Found, coll: str
) -> None:
    """Unseen by the store itself; failing closed once reidentified."""
    restore = Restore(mongo.url, coll, str)

    def whole_collection(phase: str, namespace: str) -> None:
        restore(phase)  # every document: delete_many({}), then insert_many

    check(mongo.url, "ns", whole_collection, collection=coll, **mongo.proof_options)
