"""The DynamoDB ledger against a real server (dynalite locally), sync and async (C9).

Failure injection wraps the ledger's client (``tools.inject``), so the code under test is
the shipped one, on a real table.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import botocore.exceptions
import pytest

from ledger_core import migrate, open_async_ledger, open_ledger, setup_ledger
from ledger_core.errors import (
    AmbiguousSpend,
    InvalidLedgerURL,
    LedgerClosed,
    LedgerError,
    LedgerUnavailable,
    UnsafeStoreConfig,
)
from ledger_core.ids import MAX_MARKER_BYTES, MarkerKind, marker_id
from ledger_core.protocol import Durability
from ledger_dynamodb import AsyncDynamoDBLedger, DynamoDBLedger, items
from tests.dynamodb import tools
from tests.dynamodb.tools import Call
from tests.flavors import Flavored
from tests.servers import dynamodb as servers

# The whole set on one emulator (dynalite: it starts in a second); the identity, deadline
# and durability tests and the suite run on DynamoDB Local too.
dynamodb_target = tools.on_emulators(servers.DYNALITE)

FLAVORS = ["sync", "async"]


@pytest.fixture(params=FLAVORS)
def ledger(request: pytest.FixtureRequest, dynamodb_url: str, namespace: str) -> Iterator[Flavored]:
    with Flavored(
        request.param, dynamodb_url, namespace=namespace, **tools.ledger_options(dynamodb_url)
    ) as opened:
        yield opened


def _open(url: str, **options: Any) -> DynamoDBLedger:
    ledger = open_ledger(url, **options)
    assert isinstance(ledger, DynamoDBLedger)
    return ledger


_inject = tools.inject


def _client_error(code: str, status: int, retries: int = 0) -> botocore.exceptions.ClientError:
    response: Any = {
        "Error": {"Code": code, "Message": "AKIASECRETSECRET signature=deadbeef"},
        "ResponseMetadata": {"HTTPStatusCode": status, "RetryAttempts": retries},
    }
    return botocore.exceptions.ClientError(response, "PutItem")


def test_spend_once_then_read(ledger: Flavored) -> None:
    assert ledger.is_spent("a") is False
    assert ledger.spend("a") is True
    assert ledger.spend("a") is False
    assert ledger.is_spent("a") is True
    assert ledger.is_spent("A") is False


def test_store_id_and_durability(ledger: Flavored, dynamodb_url: str) -> None:
    info = ledger.describe()
    assert info.store_id is not None
    assert info.store_id.startswith("dynamodb:")
    expected = Durability.PROCESS if tools.emulator(dynamodb_url) else Durability.MACHINE
    assert info.durability == expected


def test_emulator_without_durability_never_proves(dynamodb_url: str, namespace: str) -> None:
    if not tools.emulator(dynamodb_url):
        pytest.skip("not applicable: the URL points at AWS")
    with _open(dynamodb_url, namespace=namespace) as ledger:
        info = ledger.describe()
    assert info.store_id is None
    assert "not AWS DynamoDB" in (info.reason or "")


def test_namespaces_are_stores(dynamodb_url: str, namespace: str) -> None:
    opts = tools.ledger_options(dynamodb_url)
    with (
        _open(dynamodb_url, namespace=namespace + "-a", **opts) as a,
        _open(dynamodb_url, namespace=namespace + "-b", **opts) as b,
    ):
        assert a.store_id != b.store_id
        assert a.spend("x") is True
        assert b.is_spent("x") is False


def test_largest_id_and_marker_fit_the_key(ledger: Flavored) -> None:
    big = "é" * 512  # 1024 UTF-8 bytes
    assert ledger.spend(big) is True
    assert ledger.is_spent(big) is True
    marker = marker_id(MarkerKind.CLOSED_PROVEN, "x" * (MAX_MARKER_BYTES - 20))
    assert ledger.run(ledger.ledger.spend_marker(marker)) is True
    assert ledger.run(ledger.ledger.is_marker_spent(marker)) is True


def test_spent_ids_lists_only_this_namespace_ids(dynamodb_url: str, namespace: str) -> None:
    opts = tools.ledger_options(dynamodb_url)
    with (
        _open(dynamodb_url, namespace=namespace, **opts) as ledger,
        _open(dynamodb_url, namespace=namespace + "x", **opts) as other,
    ):
        for i in range(30):
            ledger.spend(f"id-{i}")
        other.spend("foreign")
        ledger.spend_marker(marker_id(MarkerKind.LINEAGE, "old"))
        assert sorted(ledger.spent_ids()) == sorted(f"id-{i}" for i in range(30))


@pytest.mark.parametrize("kept", [(), ("Count", "ScannedCount", "ResponseMetadata")])
def test_a_scan_page_without_its_items_fails_the_listing(
    dynamodb_url: str, namespace: str, kept: tuple[str, ...]
) -> None:
    """A Scan answer always carries ``Items``; one without (an empty JSON body parses as
    ``{}``) must fail the listing, never end its segment as if all had been listed."""
    with _open(dynamodb_url, namespace=namespace, **tools.ledger_options(dynamodb_url)) as ledger:
        for i in range(5):
            ledger.spend(f"id-{i}")

        def hollow(request: Call, perform: Callable[[Call], Any]) -> Any:
            answer = perform(request)
            if request.op == "scan":
                return {k: v for k, v in answer.items() if k in kept}
            return answer

        _inject(ledger, hollow)
        with pytest.raises(LedgerUnavailable, match="Scan"):
            list(ledger.spent_ids())


@pytest.mark.parametrize(
    "bend",
    [
        pytest.param(lambda a: {**a, "Items": [*a["Items"], {"other": {"S": "x"}}]}, id="keyless"),
        pytest.param(lambda a: {**a, "LastEvaluatedKey": "next"}, id="key-not-a-map"),
        pytest.param(lambda a: {**a, "LastEvaluatedKey": {}}, id="key-empty"),
    ],
)
def test_a_malformed_scan_page_fails_the_listing(
    dynamodb_url: str, namespace: str, bend: Callable[[dict[str, Any]], dict[str, Any]]
) -> None:
    """An item without its key, or a ``LastEvaluatedKey`` that is no key, must fail the
    listing: skipping the item or ending the segment would lose ids without a word."""
    with _open(dynamodb_url, namespace=namespace, **tools.ledger_options(dynamodb_url)) as ledger:
        for i in range(5):
            ledger.spend(f"id-{i}")

        def malformed(request: Call, perform: Callable[[Call], Any]) -> Any:
            answer = perform(request)
            return bend(answer) if request.op == "scan" else answer

        _inject(ledger, malformed)
        with pytest.raises(LedgerUnavailable, match="Scan"):
            list(ledger.spent_ids())


def test_migrate_from_dynamodb(dynamodb_url: str, namespace: str) -> None:
    opts = tools.ledger_options(dynamodb_url)
    with (
        _open(dynamodb_url, namespace=namespace, **opts) as source,
        _open(dynamodb_url, namespace=namespace + "-new", **opts) as target,
    ):
        source.spend("m1")
        source.spend("m2")
        report = migrate(source, target)
        assert (report.copied, report.verified) == (2, 2)
        assert target.is_spent("m1") is True


def test_create_false_on_missing_table_never_creates(own_table: str) -> None:
    with pytest.raises(LedgerUnavailable, match="does not exist and create=false"):
        open_ledger(own_table, create="false", **tools.ledger_options(own_table))
    client = tools.admin_client(own_table)
    with pytest.raises(client.exceptions.ResourceNotFoundException):
        client.describe_table(TableName=tools.url_parts(own_table)[0])
    client.close()


def test_setup_is_idempotent_and_creates_on_demand(own_table: str) -> None:
    opts = tools.ledger_options(own_table)
    first = setup_ledger(own_table, **opts)
    second = setup_ledger(own_table, **opts)
    assert first.store_id is not None
    assert first.store_id == second.store_id
    client = tools.admin_client(own_table)
    table = client.describe_table(TableName=tools.url_parts(own_table)[0])["Table"]
    client.close()
    assert table["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    with _open(own_table, create="false", **opts) as ledger:
        assert ledger.store_id == first.store_id


def test_forgotten_table_fails_closed_and_reopens_as_new_store(own_table: str) -> None:
    """A deleted and re-created table: the old ledger must never spend there (it would
    answer True for an id spent in the old table); a new ledger gets a new store_id."""
    opts = tools.ledger_options(own_table)
    with _open(own_table, **opts) as old:
        assert old.spend("before") is True
        tools.forget(own_table)
        with pytest.raises(UnsafeStoreConfig, match="forgot"):
            old.spend("before")
        with pytest.raises(UnsafeStoreConfig, match="forgot"):  # and it stays failed
            old.is_spent("before")
        with _open(own_table, **opts) as new:
            assert new.store_id != old.store_id
        with pytest.raises(UnsafeStoreConfig):
            old.spend("other")


def test_deleted_table_fails_the_ledger_for_good(own_table: str) -> None:
    opts = tools.ledger_options(own_table, config_interval="1000")
    with _open(own_table, **opts) as old:
        assert old.spend("x") is True
        table = tools.url_parts(own_table)[0]
        client = tools.admin_client(own_table)
        with contextlib.suppress(botocore.exceptions.ClientError):
            client.update_table(TableName=table, DeletionProtectionEnabled=False)
        client.delete_table(TableName=table)
        tools._wait(lambda: tools._status(client, table) is None, "deletion")
        with pytest.raises(UnsafeStoreConfig, match="ResourceNotFound"):
            old.spend("y")
        client.create_table(**items.create_table(table))
        tools._wait(lambda: tools._status(client, table) == "ACTIVE", "creation")
        client.close()
        # A table under the name again (a restore): the ledger stays failed.
        with pytest.raises(UnsafeStoreConfig, match="ResourceNotFound"):
            old.spend("x")


def _botocore_retry(with_item: bool) -> Callable[[Call, Callable[[Call], Any]], Any]:
    """What botocore does after a timeout: the first put lands but its reply is lost, the
    retry (RetryAttempts=1) meets it. ``with_item``: DynamoDB's ALL_OLD item comes back
    (AWS); without it, as dynalite answers, the ledger reads the record."""

    def hook(request: Call, perform: Callable[[Call], Any]) -> Any:
        if request.op != "put_item":
            return perform(request)
        perform(request)  # the first attempt lands; its reply is lost
        try:
            return perform(request)
        except botocore.exceptions.ClientError as exc:
            exc.response["ResponseMetadata"]["RetryAttempts"] = 1
            if with_item:
                exc.response["Item"] = request.params["Item"]  # type: ignore[typeddict-unknown-key]
            raise

    return hook


@pytest.mark.parametrize("with_item", [True, False], ids=["all_old", "read_back"])
def test_retry_meeting_our_own_write_is_true(
    dynamodb_url: str, namespace: str, with_item: bool
) -> None:
    """botocore resent a put whose first attempt landed: the conditional failure carries
    (or the read finds) OUR token, so the spend is True, never False."""
    with _open(
        dynamodb_url,
        namespace=namespace,
        **tools.ledger_options(dynamodb_url),
    ) as ledger:
        _inject(ledger, _botocore_retry(with_item))
        assert ledger.spend("r1") is True
        assert ledger.spend("r1") is False  # now another attempt's record: not ours


def test_lost_reply_is_resolved_by_token(dynamodb_url: str, namespace: str) -> None:
    with _open(
        dynamodb_url,
        namespace=namespace,
        **tools.ledger_options(dynamodb_url),
    ) as ledger:

        def drop_put_reply(request: Call, perform: Callable[[Call], Any]) -> Any:
            answer = perform(request)
            if request.op == "put_item":
                raise botocore.exceptions.ReadTimeoutError(endpoint_url="http://x")
            return answer

        _inject(ledger, drop_put_reply)
        assert ledger.spend("lost") is True  # our write landed: ours
        assert ledger.spend("lost") is False  # the next one meets it: another's


def test_unknown_outcome_and_failed_read_is_ambiguous(dynamodb_url: str, namespace: str) -> None:
    with _open(
        dynamodb_url,
        namespace=namespace,
        **tools.ledger_options(dynamodb_url),
    ) as ledger:
        ledger.is_spent("warm")  # the identity check is done; now every call fails

        def fail(request: Call, perform: Callable[[Call], Any]) -> Any:
            raise botocore.exceptions.ConnectionClosedError(endpoint_url="http://x")

        _inject(ledger, fail)
        with pytest.raises(AmbiguousSpend) as caught:
            ledger.spend("amb")
        assert isinstance(caught.value.__cause__, botocore.exceptions.ConnectionClosedError)
        with pytest.raises(LedgerUnavailable):
            ledger.is_spent("amb")


@pytest.mark.parametrize(
    ("code", "status", "retries", "expected"),
    [
        ("ProvisionedThroughputExceededException", 400, 0, LedgerUnavailable),
        ("AccessDeniedException", 400, 0, LedgerUnavailable),
        ("ExpiredTokenException", 400, 0, LedgerUnavailable),
        ("InvalidSignatureException", 400, 0, LedgerUnavailable),
        ("InternalServerError", 500, 0, AmbiguousSpend),  # "may or may not have succeeded"
        ("ThrottlingException", 400, 2, AmbiguousSpend),  # an earlier attempt may have landed
    ],
)
def test_errors_fail_closed_without_secrets(
    dynamodb_url: str, namespace: str, code: str, status: int, retries: int, expected: type
) -> None:
    with _open(
        dynamodb_url,
        namespace=namespace,
        **tools.ledger_options(dynamodb_url),
    ) as ledger:
        ledger.is_spent("warm")

        def fail_put(request: Call, perform: Callable[[Call], Any]) -> Any:
            if request.op == "put_item":
                raise _client_error(code, status, retries)
            if request.op == "get_item" and expected is AmbiguousSpend:
                return {}  # not there (yet)
            return perform(request)

        _inject(ledger, fail_put)
        with pytest.raises(LedgerError) as caught:
            ledger.spend(f"e-{code}")
        assert type(caught.value) is expected
        assert code in str(caught.value) or expected is AmbiguousSpend
        assert "AKIA" not in str(caught.value)
        assert "signature=" not in str(caught.value)


def test_unreachable_endpoint_is_unavailable(namespace: str) -> None:
    from tests.servers.common import free_port

    url = f"dynamodb://nothing?region=us-east-1&endpoint_url=http://127.0.0.1:{free_port()}"
    with pytest.raises(LedgerUnavailable, match="EndpointConnectionError") as caught:
        open_ledger(url, namespace=namespace, timeout="1")
    assert os.environ["AWS_SECRET_ACCESS_KEY"] not in str(caught.value)


def test_url_never_holds_credentials_and_options_are_checked() -> None:
    with pytest.raises(InvalidLedgerURL, match="credentials"):
        open_ledger("dynamodb://key:secret@table")
    with pytest.raises(InvalidLedgerURL, match="unknown option"):
        open_ledger("dynamodb://table?aws_secret_access_key=x")
    with pytest.raises(InvalidLedgerURL, match="table name"):
        open_ledger("dynamodb://ab")


@pytest.mark.parametrize(
    ("url", "routed"),
    [
        (
            "dynamodb://t-1?region=a+b&endpoint_url=http%3A%2F%2F127.0.0.1%3A8000&timeout=3",
            "dynamodb://t-1?region=a+b&endpoint_url=http%3A%2F%2F127.0.0.9%3A8001&timeout=3",
        ),
        (
            "dynamodb://t-1?endpoint_url=http://localhost:8000/x%20y&namespace=n%2Fs#f",
            "dynamodb://t-1?endpoint_url=http://127.0.0.9:8001/x%20y&namespace=n%2Fs#f",
        ),
        (
            "dynamodb://t-1?endpoint_url=https://h.example",
            "dynamodb://t-1?endpoint_url=https://127.0.0.9:444",
        ),
        (
            "dynamodb://t-1?endpoint_url=http://[::1]:9/",
            "dynamodb://t-1?endpoint_url=http://127.0.0.9:10/",
        ),
        ("dynamodb://t-1?region=eu-west-1", None),  # AWS picks the host: nothing to route
        ("dynamodb://t-1?endpoint_url=ftp://h:1", None),
    ],
)
def test_reroute_sends_only_the_endpoint_through_the_route(url: str, routed: str | None) -> None:
    """The suite's URL mode (C4/C5 through the fault proxy) asks this hook; every byte
    but the endpoint's host:port stays as written."""
    from ledger_core.urls import LedgerURL
    from ledger_dynamodb.testing import HOOKS

    assert HOOKS.reroute(LedgerURL.parse(url), lambda h, p: ("127.0.0.9", p + 1)) == routed


def test_a_ledger_never_imports_its_testing_module(dynamodb_url: str, namespace: str) -> None:
    """Test support is loaded only through the backend's ``testing`` reference."""
    args = f"{dynamodb_url!r}, namespace={namespace!r}, **{tools.ledger_options(dynamodb_url)!r}"
    script = f"""
import asyncio, sys
from ledger_core import open_async_ledger, open_ledger
with open_ledger({args}) as ledger:
    assert ledger.spend("a") and ledger.is_spent("a") and list(ledger.spent_ids()) == ["a"]
    ledger.doctor_checks()
async def main():
    async with await open_async_ledger({args}) as ledger:
        assert not await ledger.spend("a") and [i async for i in ledger.spent_ids()] == ["a"]
asyncio.run(main())
assert "ledger_dynamodb.testing" not in sys.modules
"""
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)


def test_from_client_is_never_closed(dynamodb_url: str, namespace: str) -> None:
    client = tools.admin_client(dynamodb_url)
    table = tools.url_parts(dynamodb_url)[0]
    opts = tools.ledger_options(dynamodb_url)
    opts.pop("timeout")
    ledger = DynamoDBLedger.from_client(client, table, namespace=namespace, **opts)
    assert ledger.spend("c") is True
    ledger.close()
    with pytest.raises(LedgerClosed):
        ledger.spend("d")
    client.describe_table(TableName=table)  # still usable
    client.close()


def test_forked_child_builds_its_own_client(dynamodb_url: str, namespace: str) -> None:
    with _open(dynamodb_url, namespace=namespace, **tools.ledger_options(dynamodb_url)) as ledger:
        assert ledger.spend("parent") is True
        parent_client = ledger._client
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: exit code says what happened
            code = 1
            try:
                ok = ledger.spend("child") is True and ledger._client is not parent_client
                code = 0 if ok else 2
            finally:
                os._exit(code)
        os.close(write)
        os.close(read)
        _, status = os.waitpid(pid, 0)
        assert os.WEXITSTATUS(status) == 0
        assert ledger.is_spent("child") is True
        assert ledger._client is parent_client


def test_forked_child_of_an_async_ledger_builds_its_own_client(
    dynamodb_url: str, namespace: str
) -> None:
    """The async ledger's twin of the test above: the child, on its own event loop,
    spends on a client of its own, never on the parent's (bound to the parent's loop)."""
    import asyncio

    async def child(ledger: AsyncDynamoDBLedger, parent_client: Any) -> bool:
        return await ledger.spend("child") is True and ledger._client is not parent_client

    async def main() -> None:
        opts = tools.ledger_options(dynamodb_url)
        ledger = await open_async_ledger(dynamodb_url, namespace=namespace, **opts)
        assert isinstance(ledger, AsyncDynamoDBLedger)
        async with ledger:
            assert await ledger.spend("parent") is True
            parent_client = ledger._client
            pid = os.fork()
            if pid == 0:  # the child: exit code says what happened
                code = 1
                try:
                    code = 0 if asyncio.run(child(ledger, parent_client)) else 2
                finally:
                    os._exit(code)
            _, status = await asyncio.to_thread(os.waitpid, pid, 0)
            assert os.WEXITSTATUS(status) == 0
            assert await ledger.is_spent("child") is True
            assert ledger._client is parent_client

    asyncio.run(main())


def test_failed_identity_check_is_a_ledger_error_and_nothing_was_sent(
    dynamodb_url: str, namespace: str
) -> None:
    """A driver exception during the table check (before the spend's put) is a
    LedgerUnavailable, not a raw botocore error and not an ambiguity."""
    opts = tools.ledger_options(dynamodb_url, config_interval="0")
    with _open(dynamodb_url, namespace=namespace, **opts) as ledger:

        def fail(request: Call, perform: Callable[[Call], Any]) -> Any:
            raise botocore.exceptions.ConnectionClosedError(endpoint_url="http://x")

        _inject(ledger, fail)
        with pytest.raises(LedgerUnavailable) as caught:
            ledger.spend("never-sent")
        assert not isinstance(caught.value, AmbiguousSpend)


def test_a_resource_is_refused(dynamodb_url: str) -> None:
    """A resource's client re-serializes our attribute values (boto3 handlers): the
    genesis read failed with a key-schema ValidationException before this check."""
    import boto3

    _, query = tools.url_parts(dynamodb_url)
    resource = boto3.session.Session().resource(
        "dynamodb", region_name=query.get("region"), endpoint_url=query.get("endpoint_url")
    )
    with pytest.raises(TypeError, match="not a resource"):
        DynamoDBLedger.from_client(resource, tools.url_parts(dynamodb_url)[0])


@pytest.fixture
def host_credentials(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Credentials given to a host's client alone: the standard chain holds none."""
    if os.environ.get(servers.URL_ENV):
        pytest.skip("real AWS: the standard chain is left alone")
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    return {"aws_access_key_id": servers.LOCAL_KEY, "aws_secret_access_key": servers.LOCAL_KEY}


def test_a_child_of_a_host_client_signs_with_its_credentials(
    dynamodb_url: str, namespace: str, host_credentials: dict[str, Any]
) -> None:
    """The child's new client carries the host client's credentials (not the chain's)."""
    import boto3

    table, query = tools.url_parts(dynamodb_url)
    where: dict[str, Any] = {
        "region_name": query.get("region"),
        "endpoint_url": query.get("endpoint_url"),
    }
    client = boto3.session.Session().client("dynamodb", **where, **host_credentials)
    opts = tools.ledger_options(dynamodb_url)
    opts.pop("timeout")
    with DynamoDBLedger.from_client(client, table, namespace=namespace, **opts) as ledger:
        assert ledger.spend("parent") is True
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = 0 if ledger.spend("child") is True else 2
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.WEXITSTATUS(status) == 0
        assert ledger.is_spent("child") is True


def test_a_rebuilt_async_host_client_signs_with_its_credentials(
    dynamodb_url: str, namespace: str, host_credentials: dict[str, Any]
) -> None:
    """What a forked child of an async host's ledger builds signs with the host's."""
    import asyncio

    import aiobotocore.session

    table, query = tools.url_parts(dynamodb_url)
    where: dict[str, Any] = {
        "region_name": query.get("region"),
        "endpoint_url": query.get("endpoint_url"),
    }
    opts = tools.ledger_options(dynamodb_url)
    opts.pop("timeout")

    async def main() -> None:
        session = aiobotocore.session.AioSession()
        async with session.create_client("dynamodb", **where, **host_credentials) as client:
            ledger = await AsyncDynamoDBLedger.from_client(
                client, table, namespace=namespace, **opts
            )
            async with ledger:
                assert ledger._client is client
                rebuilt = await ledger._built()  # what a forked child's first call builds
                try:
                    await rebuilt.describe_table(TableName=table)
                finally:
                    await rebuilt.close()

    asyncio.run(main())
