"""C10 re-entry (``spend_as``: one conditional PutItem) and namespace listing on DynamoDB,
sync and async, on the real server (dynalite locally)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import botocore.exceptions
import pytest

from ledger_core.errors import AmbiguousSpend
from ledger_dynamodb import DynamoDBLedger
from ledger_dynamodb.options import MAX_ATTEMPTS
from tests import reentry
from tests.dynamodb import tools
from tests.dynamodb.test_ledger import _inject, _open
from tests.dynamodb.tools import Call
from tests.flavors import Flavored
from tests.servers import dynamodb as servers

# The whole set on one emulator (dynalite: it starts in a second); the identity, deadline
# and durability tests and the suite run on DynamoDB Local too.
dynamodb_target = tools.on_emulators(servers.DYNALITE)

RACE_ROUNDS = 20


@pytest.fixture(params=["sync", "async"])
def ledger(request: pytest.FixtureRequest, dynamodb_url: str, namespace: str) -> Iterator[Flavored]:
    options = tools.ledger_options(dynamodb_url)
    with Flavored(request.param, dynamodb_url, namespace=namespace, **options) as opened:
        yield opened


def test_spend_as_reenters_only_the_winner(ledger: Flavored) -> None:
    reentry.check_reentry(ledger)


def test_racing_attempts_exactly_one_wins(ledger: Flavored) -> None:
    reentry.check_race(ledger, RACE_ROUNDS)


def _ledger(url: str, namespace: str) -> DynamoDBLedger:
    return _open(url, namespace=namespace, **tools.ledger_options(url))


def _lose_put_reply(times: int) -> Callable[[Call, Callable[[Call], Any]], Any]:
    """The first ``times`` PutItems land but their replies are lost."""
    left = [times]

    def hook(request: Call, perform: Callable[[Call], Any]) -> Any:
        answer = perform(request)
        if request.op == "put_item" and left[0] > 0:
            left[0] -= 1
            raise botocore.exceptions.ReadTimeoutError(endpoint_url="http://x")
        return answer

    return hook


def test_lost_reply_is_settled_by_the_same_put(dynamodb_url: str, namespace: str) -> None:
    """C5: the put landed, its reply was lost; sending it again answers for it."""
    with _ledger(dynamodb_url, namespace) as ledger:
        _inject(ledger, _lose_put_reply(1))
        assert ledger.spend_as("lost", reentry.KEYS[0]) is True
        assert ledger.spend_as("lost", reentry.KEYS[1]) is False
        assert ledger.spend_as("lost", reentry.KEYS[0]) is True


def test_lost_reply_of_another_keys_record_is_false(dynamodb_url: str, namespace: str) -> None:
    with _ledger(dynamodb_url, namespace) as ledger:
        assert ledger.spend_as("theirs", reentry.KEYS[1]) is True

        def drop_request(request: Call, perform: Callable[[Call], Any]) -> Any:
            if request.op == "put_item" and not dropped:
                dropped.append(request)
                raise botocore.exceptions.ConnectionClosedError(endpoint_url="http://x")
            return perform(request)

        dropped: list[Call] = []
        _inject(ledger, drop_request)
        assert ledger.spend_as("theirs", reentry.KEYS[0]) is False
        assert dropped


def test_unsettled_reply_is_ambiguous(dynamodb_url: str, namespace: str) -> None:
    with _ledger(dynamodb_url, namespace) as ledger:
        _inject(ledger, _lose_put_reply(MAX_ATTEMPTS))  # every attempt's reply is lost
        with pytest.raises(AmbiguousSpend) as caught:
            ledger.spend_as("unknown", reentry.KEYS[0])
        assert isinstance(caught.value.__cause__, botocore.exceptions.ReadTimeoutError)
        assert ledger.spend_as("unknown", reentry.KEYS[0]) is True  # it had landed: ours


def test_namespaces_lists_each_namespace_once(dynamodb_url: str, namespace: str) -> None:
    others = [f"{namespace}-{n}" for n in ("a", "b", "é:/x")]
    options = tools.ledger_options(dynamodb_url)
    for other in others:
        with Flavored("sync", dynamodb_url, namespace=other, **options) as opened:
            opened.spend("x")
            opened.ledger.spend_marker(b"\xffmarker\x00x")
    for flavor in ("sync", "async"):
        with Flavored(flavor, dynamodb_url, namespace=namespace, **options) as opened:
            listed = reentry.namespaces(opened)
            assert len(listed) == len(set(listed))
            assert {namespace, *others} <= set(listed)
