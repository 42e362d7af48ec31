"""``spend_many`` / ``is_spent_many`` on DynamoDB, sync and async (C9): one answer per id,
in order, each what ``spend`` / ``is_spent`` would say; an outcome that stays unknown
fails the call, never a guess; an absent id is proven by a genesis read after the batch."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import botocore.exceptions
import pytest

from ledger_core.errors import AmbiguousSpend, LedgerUnavailable, UnsafeStoreConfig
from ledger_core.ids import ledger_key
from ledger_dynamodb import items
from tests.dynamodb import tools
from tests.dynamodb.test_ledger import _client_error, _open
from tests.dynamodb.tools import Call, Perform
from tests.flavors import Flavored
from tests.servers import dynamodb as servers

# The whole set on one emulator (dynalite: it starts in a second); the identity, deadline
# and durability tests and the suite run on DynamoDB Local too.
dynamodb_target = tools.on_emulators(servers.DYNALITE)


@pytest.fixture(params=["sync", "async"])
def ledger(request: pytest.FixtureRequest, dynamodb_url: str, namespace: str) -> Iterator[Flavored]:
    """The sync ledger and the async one, the same body asserted on each (C9)."""
    flavored = Flavored(
        request.param, dynamodb_url, namespace=namespace, **tools.ledger_options(dynamodb_url)
    )
    with flavored:
        yield flavored


def test_each_answer_is_what_spend_would_say_in_order(ledger: Flavored) -> None:
    assert ledger.spend("a") is True
    spent = ledger.run(ledger.ledger.spend_many(["a", "b", "b", "c", "a"]))
    assert spent == [False, True, False, True, False]
    read = ledger.run(ledger.ledger.is_spent_many(["a", "b", "x", "c", "x", "é:/\n"]))
    assert read == [True, True, False, True, False, False]
    assert ledger.run(ledger.ledger.spend_many([])) == []
    assert ledger.run(ledger.ledger.is_spent_many([])) == []


def test_many_ids_span_several_batches(ledger: Flavored) -> None:
    ids = [f"id-{n}" for n in range(230)]  # 4 spend batches, 3 read batches
    assert ledger.run(ledger.ledger.spend_many(ids[::2])) == [True] * 115
    assert ledger.run(ledger.ledger.spend_many(ids)) == [n % 2 == 1 for n in range(230)]
    assert ledger.run(ledger.ledger.is_spent_many([*ids, "new"])) == [True] * 230 + [False]
    assert sorted(ledger.spent_ids()) == sorted(ids)


def test_an_invalid_id_refuses_the_call_before_any_write(ledger: Flavored) -> None:
    with pytest.raises(ValueError):
        ledger.run(ledger.ledger.spend_many(["fine", ""]))
    assert ledger.is_spent("fine") is False


def _failing_put(key: bytes, error: Exception, stored: bool = False) -> Any:
    """Every put of ``key`` raises ``error`` (landing first when ``stored``); a read of
    it finds nothing; everything else goes to the store."""

    def hook(call: Call, perform: Perform) -> Any:
        named = call.params.get("Item", call.params.get("Key", {})).get(items.KEY, {}).get("B")
        if named != key:
            return perform(call)
        if call.op == "put_item":
            if stored:
                perform(call)
            raise error
        return {}

    return hook


def _key(ledger: Any, request_id: str) -> bytes:
    return ledger_key(ledger.describe().namespace, request_id.encode())


def test_an_unknown_outcome_with_other_ids_recorded_is_ambiguous(
    dynamodb_url: str, namespace: str
) -> None:
    with _open(dynamodb_url, namespace=namespace, **tools.ledger_options(dynamodb_url)) as ledger:
        lost = botocore.exceptions.ConnectionClosedError(endpoint_url="http://x")
        tools.inject(ledger, _failing_put(_key(ledger, "lost"), lost))
        with pytest.raises(AmbiguousSpend, match="spend_many"):
            ledger.spend_many(["one", "lost", "two"])
        assert ledger.is_spent_many(["one", "two"]) == [True, True]  # recorded: not lied about


def test_a_refused_put_among_spent_ids_is_unavailable(dynamodb_url: str, namespace: str) -> None:
    """Nothing of this batch was recorded by the call: the refusal itself is raised."""
    with _open(dynamodb_url, namespace=namespace, **tools.ledger_options(dynamodb_url)) as ledger:
        assert ledger.spend_many(["one", "two"]) == [True, True]
        denied = _client_error("AccessDeniedException", 400)
        tools.inject(ledger, _failing_put(_key(ledger, "denied"), denied))
        with pytest.raises(LedgerUnavailable, match="AccessDenied") as caught:
            ledger.spend_many(["one", "denied", "two"])
        assert not isinstance(caught.value, AmbiguousSpend)


def _batch_reads(answers: list[Any]) -> Any:
    """The first ``BatchGetItem`` answers replaced (a callable: of the real answer)."""

    def hook(call: Call, perform: Perform) -> Any:
        if call.op != "batch_get_item" or not answers:
            return perform(call)
        return answers.pop(0)(perform(call), call)

    return hook


def _all_unprocessed(answer: Any, call: Call) -> Any:
    return {"Responses": {}, "UnprocessedKeys": call.params["RequestItems"]}


def test_unprocessed_keys_are_asked_again(dynamodb_url: str, namespace: str) -> None:
    with _open(dynamodb_url, namespace=namespace, **tools.ledger_options(dynamodb_url)) as ledger:
        ledger.spend_many(["a", "b"])
        table = tools.url_parts(dynamodb_url)[0]

        def with_table(answer: Any, call: Call) -> Any:
            return {"Responses": {table: []}, "UnprocessedKeys": call.params["RequestItems"]}

        tools.inject(ledger, _batch_reads([_all_unprocessed, with_table]))
        assert ledger.is_spent_many(["a", "x", "b"]) == [True, False, True]


def test_keys_left_unprocessed_until_the_deadline_are_unavailable(
    dynamodb_url: str, namespace: str
) -> None:
    options = tools.ledger_options(dynamodb_url, timeout="1")
    with _open(dynamodb_url, namespace=namespace, **options) as ledger:
        tools.inject(ledger, _batch_reads([_all_unprocessed] * 100))
        with pytest.raises(LedgerUnavailable, match="unprocessed"):
            ledger.is_spent_many(["a", "b"])


@pytest.mark.parametrize(
    "bend",
    [
        pytest.param(lambda a, c: {}, id="no-responses"),
        pytest.param(lambda a, c: {**a, "UnprocessedKeys": ["x"]}, id="unprocessed-not-a-map"),
        pytest.param(lambda a, c: "not a map", id="not-a-map"),
        pytest.param(
            lambda a, c: {"Responses": {t: [{"x": {"S": "y"}}] for t in a["Responses"]}},
            id="keyless-item",
        ),
    ],
)
def test_a_malformed_batch_read_is_unavailable(
    dynamodb_url: str, namespace: str, bend: Any
) -> None:
    """Taken as "nothing found", each would read a spent id as not spent."""
    with _open(dynamodb_url, namespace=namespace, **tools.ledger_options(dynamodb_url)) as ledger:
        ledger.spend("a")
        tools.inject(ledger, _batch_reads([bend]))
        with pytest.raises(LedgerUnavailable, match="is_spent_many"):
            ledger.is_spent_many(["a"])


@pytest.mark.parametrize("method", ["spend_many", "is_spent_many"])
def test_a_batch_is_proven_by_the_genesis(dynamodb_url: str, namespace: str, method: str) -> None:
    """A genesis gone after the batch: the ledger fails for good, never answers."""
    with _open(dynamodb_url, namespace=namespace, **tools.ledger_options(dynamodb_url)) as ledger:
        genesis = items.genesis_key(namespace)

        def gone(call: Call, perform: Perform) -> Any:
            if call.op == "get_item" and call.params["Key"][items.KEY]["B"] == genesis:
                return {}
            return perform(call)

        tools.inject(ledger, gone)
        with pytest.raises(UnsafeStoreConfig, match="forgot"):
            getattr(ledger, method)(["p", "q"])
        with pytest.raises(UnsafeStoreConfig, match="forgot"):
            ledger.is_spent("p")
