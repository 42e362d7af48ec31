"""The MongoDB ledger against a real server (tests/servers/mongodb.py): ids, identity,
forgetting, create/setup, lost replies, listing, fork safety, host clients, secrets."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import warnings
from typing import Any

import pytest
from pymongo import AsyncMongoClient, MongoClient

from ledger_core import open_async_ledger, open_ledger, setup_ledger
from ledger_core.cli import main as cli
from ledger_core.errors import (
    AmbiguousSpend,
    InvalidLedgerURL,
    LedgerError,
    LedgerUnavailable,
    UnsafeStoreConfig,
)
from ledger_core.ids import closed_proven_marker
from ledger_core.migrate import migrate
from ledger_mongodb import AsyncMongoLedger, MongoLedger
from ledger_mongodb.options import DEFAULT_DATABASE
from tests.flavors import Flavored
from tests.mongodb.conftest import _db
from tests.mongodb.scripted import losing
from tests.servers import mongodb as servers

FLAVORS = ["sync", "async"]


def _open(url: str, **options: Any) -> MongoLedger:
    ledger = open_ledger(url, **options)
    assert isinstance(ledger, MongoLedger)
    return ledger


@pytest.mark.parametrize("flavor", FLAVORS)
def test_once_exact_ids_and_markers(
    mongo: servers.Found, ledger_url: str, coll: str, flavor: str
) -> None:
    with Flavored(flavor, ledger_url, namespace="n", collection=coll) as ledger:
        ids = ["a", "A", "a\x00", "x:y", "\u00e9", "e\u0301", "z" * 1024]
        assert [ledger.spend(i) for i in ids] == [True] * len(ids)
        assert [ledger.spend(i) for i in ids] == [False] * len(ids)
        assert all(ledger.is_spent(i) for i in ids)
        assert ledger.is_spent("b") is False
        marker = closed_proven_marker("z" * 1024)  # 1038 bytes: beside the ids
        assert ledger.run(ledger.ledger.spend_marker(marker)) is True
        assert ledger.run(ledger.ledger.is_marker_spent(marker)) is True
        assert ledger.describe().durability == ("process-crash" if mongo.nx else "machine-crash")


def test_key_encoding_probed_and_recorded(
    ledger_url: str,
    mongo: servers.Found,
    mongo_url: str,
    coll: str,
    client: MongoClient[dict[str, Any]],
) -> None:
    """nx-27017 finds nothing by BinData equality (is_spent would read False for a spent
    id): the probe there picks hex text, MongoDB keeps BinData; the genesis records it."""
    with _open(ledger_url, namespace="n", collection=coll) as ledger:
        assert ledger.spend("id-1") is True
        assert ledger.is_spent("id-1") is True
        encoding = "bin" if ledger._binary else "hex"
        if mongo.server is not None and mongo.server.kind == "nx-27017":
            assert encoding == "hex"
        genesis = _db(client)[coll].find_one({"_id": "genesis\x00n"})
        assert genesis is not None
        assert genesis["enc"] == encoding


def test_create_false_on_missing_collection(
    ledger_url: str, mongo_url: str, coll: str, client: MongoClient[dict[str, Any]]
) -> None:
    """Reads never create. nx-27017 lists every collection whatever the filter: another
    collection in the database must not pass for ours."""
    db = _db(client)
    db["zz_other_collection"].insert_one({"x": 1})
    with pytest.raises(LedgerUnavailable, match="does not exist"):
        open_ledger(ledger_url, collection=coll, create="false")
    assert coll not in db.list_collection_names()


def test_create_false_without_genesis(
    ledger_url: str, mongo_url: str, coll: str, client: MongoClient[dict[str, Any]]
) -> None:
    _db(client).create_collection(coll)
    with pytest.raises(LedgerUnavailable, match=r"genesis document.*does not exist"):
        open_ledger(ledger_url, collection=coll, create=False, namespace="fresh")


def test_setup_is_idempotent_and_prints_identity(
    ledger_url: str, mongo_url: str, coll: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"{ledger_url}&collection={coll}"
    first = setup_ledger(url, namespace="s")
    assert first.store_id is not None
    assert setup_ledger(url, namespace="s").store_id == first.store_id
    assert cli(["setup", url, "--namespace", "s"]) == 0
    assert first.store_id in capsys.readouterr().out
    with _open(url, namespace="s", create=False) as ledger:
        assert ledger.store_id == first.store_id


@pytest.mark.parametrize("flavor", FLAVORS)
def test_dropped_collection_is_noticed_by_old_instances(
    ledger_url: str, mongo_url: str, coll: str, client: MongoClient[dict[str, Any]], flavor: str
) -> None:
    """A dropped (and re-created) collection is a new store: an old instance never
    answers from it, and stays failed closed; a new one gets a new store_id."""
    with Flavored(flavor, ledger_url, namespace="n", collection=coll) as old:
        assert old.spend("spent-before") is True
        before = old.store_id
        _db(client).drop_collection(coll)
        with pytest.raises(LedgerError, match="forgot"):
            old.spend("spent-before")  # the insert lands in a new collection: never True
        with pytest.raises(LedgerError, match="forgot"):
            old.is_spent("spent-before")
        with Flavored(flavor, ledger_url, namespace="n", collection=coll) as new:
            assert new.store_id not in (None, before)
            assert new.spend("another") is True
        with pytest.raises(UnsafeStoreConfig):  # failed closed for good
            old.spend("another-2")


@pytest.mark.parametrize("flavor", FLAVORS)
def test_deleted_genesis_fails_reads_at_once(
    ledger_url: str, mongo_url: str, coll: str, client: MongoClient[dict[str, Any]], flavor: str
) -> None:
    """``deleteMany({})`` spares the collection (and its UUID): the read proves the
    genesis in its own round trip."""
    with Flavored(flavor, ledger_url, namespace="n", collection=coll) as ledger:
        assert ledger.spend("x") is True
        _db(client)[coll].delete_many({})
        with pytest.raises(LedgerError, match="forgot"):
            ledger.is_spent("x")


def test_ttl_index_never_proves_and_recheck_fails_closed(
    ledger_url: str, mongo_url: str, coll: str, client: MongoClient[dict[str, Any]]
) -> None:
    with _open(ledger_url, namespace="n", collection=coll, recheck=0) as ledger:
        assert ledger.store_id is not None
        assert ledger.spend("x") is True
        _db(client)[coll].create_index("at", expireAfterSeconds=60)
        with pytest.raises(UnsafeStoreConfig, match="changed"):
            ledger.spend("y")  # re-checked before the spend: the store may now forget
    with _open(ledger_url, namespace="n", collection=coll) as reopened:
        assert reopened.store_id is None
        assert "TTL" in (reopened.describe().reason or "")


def test_one_recheck_at_a_time(ledger_url: str, coll: str) -> None:
    """When the period ends, one call re-checks and the concurrent ones go on: before,
    every call in flight re-read six facts at once and 256 tasks timed out on nx-27017.
    The re-check's ``hello`` is held until another spend's insert is sent: a spend that
    waited for the re-check would never send it."""

    async def main() -> list[bool]:
        ledger: Any = await open_async_ledger(
            ledger_url, namespace="n", collection=coll, recheck=60
        )
        try:
            await ledger.spend("warm")
            admin, db, inserted = ledger._admin, ledger._db, asyncio.Event()

            class Held:
                async def command(self, command: Any, **kwargs: Any) -> Any:
                    if "hello" in command:
                        await inserted.wait()
                    return await admin.command(command, **kwargs)

            class Watched:
                def command(self, command: Any, **kwargs: Any) -> Any:
                    if "insert" in command:
                        inserted.set()
                    return db.command(command, **kwargs)

            ledger._admin, ledger._db = Held(), Watched()
            ledger._guard.again()  # the period ended: the next call re-checks
            first = asyncio.create_task(ledger.spend("a"))  # this one re-checks
            second = asyncio.create_task(ledger.spend("b"))  # this one does not wait for it
            answers = await asyncio.wait_for(asyncio.gather(first, second), 30)
            assert not ledger._guard.due()  # the next re-check is a period away
            return list(answers)
        finally:
            await ledger.aclose()

    assert asyncio.run(main()) == [True, True]


def test_lost_reply_of_our_own_write_is_true(ledger_url: str, coll: str) -> None:
    """The insert landed but its reply was lost: the same token again finds ours (C5)."""
    with _open(ledger_url, namespace="n", collection=coll) as ledger:
        ledger.spend("warm")  # the migration check is behind it
        with losing(ledger, lose={1}):
            assert ledger.spend("landed") is True
        assert ledger.spend("landed") is False


def test_lost_request_then_foreign_write_is_false(
    ledger_url: str, mongo_url: str, coll: str
) -> None:
    with _open(ledger_url, namespace="n", collection=coll) as ledger:
        assert ledger.spend("theirs") is True
        with losing(ledger, lose=set(), drop={1}):
            assert ledger.spend("theirs") is False


def test_unsettled_reply_is_ambiguous(ledger_url: str, coll: str) -> None:
    with _open(ledger_url, namespace="n", collection=coll) as ledger:
        ledger.spend("warm")  # the migration check is behind it
        with losing(ledger, lose={1}, drop={2, 3, 4}), pytest.raises(AmbiguousSpend):
            ledger.spend("unknown")
        assert ledger.is_spent("unknown") is True  # it had landed


def test_spent_ids_pages_and_skips(ledger_url: str, mongo_url: str, coll: str) -> None:
    ids = [f"id-{n}" for n in range(8)] + ["A", "a"]
    with (
        _open(ledger_url, namespace="src", collection=coll) as source,
        _open(ledger_url, namespace="other", collection=coll) as other,
        _open(ledger_url, namespace="dst", collection=coll) as target,
    ):
        source.LIST_PAGE = 3
        for request_id in ids:
            source.spend(request_id)
        other.spend("not-mine")
        source.spend_marker(closed_proven_marker("id-1"))
        assert sorted(source.spent_ids()) == sorted(ids)
        report = migrate(source, target)
        assert report.verified == len(ids)
        assert all(target.is_spent(i) for i in ids)


def test_async_spent_ids(mongo_url: str, coll: str) -> None:
    async def main() -> list[str]:
        client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(mongo_url)
        try:
            ledger = await AsyncMongoLedger.from_client(client, namespace="n", collection=coll)
            for request_id in ("b", "a"):
                await ledger.spend(request_id)
            return sorted([i async for i in ledger.spent_ids()])
        finally:
            await client.close()

    assert asyncio.run(main()) == ["a", "b"]


@pytest.mark.parametrize("given", ["url", "host"])
def test_forked_child_rebuilds_its_client(
    ledger_url: str, coll: str, client: MongoClient[dict[str, Any]], given: str
) -> None:
    """A child never uses the parent's sockets: it gets a client of its own (a host's: a
    duplicate, so PyMongo never warns that a client opened before the fork "may not be
    entirely fork-safe"), and the parent's keeps working after the child exits."""
    if given == "url":
        ledger = _open(ledger_url, namespace="n", collection=coll)
    else:
        ledger = MongoLedger.from_collection(_db(client)[coll], namespace="n")
    with ledger:
        assert ledger.spend("parent") is True
        parent_client = ledger._client
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child reports through its exit code
            code = 1
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("error")
                    fresh = ledger.spend("child") is True and ledger.spend("parent") is False
                code = 0 if fresh and ledger._client is not parent_client else 2
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert ledger._client is parent_client
        assert ledger.is_spent("child") is True
        assert ledger.spend("parent-again") is True


def test_host_clients_are_never_closed(
    mongo: servers.Found, mongo_url: str, coll: str, client: MongoClient[dict[str, Any]]
) -> None:
    db = _db(client)
    proof = mongo.proof_options
    with MongoLedger.from_collection(db[coll], namespace="h", **proof) as by_collection:
        assert by_collection.spend("x") is True
        assert by_collection.store_id is not None
    with MongoLedger.from_database(db, namespace="h", collection=coll, **proof) as by_database:
        assert by_database.spend("x") is False
        assert by_database.store_id == by_collection.store_id
    assert client.admin.command("ping")["ok"] == 1  # still open

    async def motor() -> bool:
        from motor.motor_asyncio import AsyncIOMotorClient

        motor_client: Any = AsyncIOMotorClient(mongo_url)
        try:
            ledger = await AsyncMongoLedger.from_collection(
                motor_client.get_default_database(DEFAULT_DATABASE)[coll], namespace="h"
            )
            answer: bool = await ledger.spend("x")
            await ledger.aclose()
            await motor_client.admin.command("ping")  # still open
            return answer
        finally:
            motor_client.close()

    assert asyncio.run(motor()) is False


def test_nx_27017_proves_only_at_the_process_bound(mongo: servers.Found, coll: str) -> None:
    """nx-27017 turns j:true into a SQLite PRAGMA shared by every client of the database
    and reports no journal mode: by default it never proves; ``durability=process`` is
    the user's explicit acceptance, and describe() says so."""
    if not mongo.nx:
        pytest.skip("not applicable: the server is not nx-27017")
    with _open(mongo.url, namespace="n", collection=coll) as default:
        assert default.store_id is None
        assert "nx-27017" in (default.describe().reason or "")
        assert default.spend("x") is True  # still a ledger: once, fail closed
    with _open(mongo.url, namespace="n", collection=coll, durability="process") as accepted:
        assert accepted.store_id is not None
        assert accepted.describe().durability == "process-crash"


def test_secrets_never_shown() -> None:
    url = "mongodb://user:s3cret-pw@127.0.0.1:9/db?authSource=admin&directConnection=true"
    with pytest.raises(LedgerUnavailable) as failure:
        open_ledger(url, timeout=0.3)
    assert "s3cret-pw" not in str(failure.value)
    with pytest.raises(InvalidLedgerURL) as bad:
        open_ledger(url, nonsense=1)
    assert "s3cret-pw" not in str(bad.value)


def test_a_ledger_never_imports_its_test_support(ledger_url: str, coll: str) -> None:
    """Opening and using a ledger (sync and async) leaves ``ledger_mongodb.testing`` unloaded."""
    code = (
        "import asyncio, sys\n"
        "from ledger_core import open_async_ledger, open_ledger\n"
        "url, coll = sys.argv[1], sys.argv[2]\n"
        "with open_ledger(url, collection=coll) as ledger:\n"
        "    assert ledger.spend('a') and ledger.is_spent('a')\n"
        "async def main():\n"
        "    ledger = await open_async_ledger(url, collection=coll)\n"
        "    assert await ledger.is_spent('a')\n"
        "    await ledger.aclose()\n"
        "asyncio.run(main())\n"
        "assert 'ledger_mongodb.testing' not in sys.modules, 'imported'\n"
    )
    subprocess.run([sys.executable, "-c", code, ledger_url, coll], check=True)
