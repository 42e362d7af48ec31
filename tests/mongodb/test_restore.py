"""A MongoDB collection restored from an export (``delete_many({})`` and ``insert_many``
of the earlier documents: the collection and its UUID stay), and ``reidentify`` (C6)."""

from __future__ import annotations

from tests.mongodb.test_conformance_mongodb import Restore
from tests.restoring import restore_goes_unseen, restored_then_reidentified
from tests.servers import mongodb as servers


def test_a_restored_collection_keeps_its_store_id_until_reidentified(
    mongo: servers.Found, coll: str
) -> None:
    restore = Restore(mongo.url, coll, str)
    restore_goes_unseen(
        mongo.url, "ns", lambda phase, _: restore(phase), collection=coll, **mongo.proof_options
    )


def test_a_restored_collection_fails_closed_once_reidentified(
    mongo: servers.Found, coll: str
) -> None:
    restore = Restore(mongo.url, coll, str)
    restored_then_reidentified(
        mongo.url, "ns", lambda phase, _: restore(phase), collection=coll, **mongo.proof_options
    )
