"""A store that forgets under an open ledger: every answer that could let a call run
(``spend`` True, ``is_spent`` False) is proven by a genesis read after it, so no window
lets the old ledger answer for a table that forgot. Sync and async, on both emulators:
the items deleted (the genesis with them) right after a check, the table deleted and
re-created in milliseconds, and re-created while a request is held on the way."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from ledger_core.errors import LedgerError
from tests.dynamodb import tools
from tests.dynamodb.relay import relay_for
from tests.flavors import Flavored


@pytest.fixture(params=["sync", "async"])
def flavor(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def admin(table_url: str) -> Iterator[Any]:
    """The forgetting admin's client, made before the ledger's last check."""
    client = tools.admin_client(table_url)
    yield client
    client.close()


@pytest.fixture
def table_url(dynamodb_url: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """A table of this test's own (the test empties it), deleted afterwards."""
    with tools.table_of_its_own(dynamodb_url, request.node.name, "f") as url:
        yield url


def _opened(flavor: str, url: str) -> Flavored:
    return Flavored(flavor, url, namespace="ns", **tools.ledger_options(url))


def _answer(call: Callable[[str], bool], request_id: str) -> bool | LedgerError:
    try:
        return call(request_id)
    except LedgerError as exc:
        return exc


def _fails_closed(ledger: Flavored) -> None:
    """The id spent before the forget never spends again nor reads as unspent (a False
    from spend, a True from is_spent refuse the call: no proof needed), and no answer
    that would let a call run comes from the forgotten store."""
    assert _answer(ledger.spend, "spent") is not True
    assert _answer(ledger.is_spent, "spent") is not False
    with pytest.raises(LedgerError):
        ledger.spend("fresh")
    with pytest.raises(LedgerError):
        ledger.is_spent("fresh")


def _after_a_check(ledger: Flavored) -> None:
    """An identity check has just passed: the forget follows at once. (Before every
    answer was proven, the genesis was re-read when 0.25 s had passed since the last
    check: the pause makes this read one, and the forget then fell in its window.)"""
    time.sleep(0.3)
    assert ledger.is_spent("warm") is False


def test_items_deleted_right_after_a_check(flavor: str, table_url: str, admin: Any) -> None:
    with _opened(flavor, table_url) as old:
        assert old.spend("spent") is True
        _after_a_check(old)
        tools.delete_every_item(table_url, admin)  # the genesis with the records
        _fails_closed(old)


def test_table_recreated_in_milliseconds(flavor: str, table_url: str, admin: Any) -> None:
    with _opened(flavor, table_url) as old:
        assert old.spend("spent") is True
        _after_a_check(old)
        tools.forget(table_url, admin)  # deleted and created again: 20 ms each on our emulators
        with _opened(flavor, table_url) as new:  # writes the new table's genesis
            assert new.store_id not in (None, old.store_id)
            assert new.spend("spent") is True
        _fails_closed(old)


def _recreated_while_held(call: Callable[[], Any], url: str, admin: Any, relay: Any) -> Any:
    relay.hold()
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(call)
        assert relay.holding.wait(10), "the request never reached the relay"
        tools.forget(url, admin)  # the admin's client goes straight to the server
        relay.release()
        return pending.exception(30) or pending.result()


@pytest.mark.parametrize("operation", ["spend", "is_spent"])
def test_table_recreated_while_the_request_is_held(
    flavor: str, table_url: str, admin: Any, operation: str
) -> None:
    endpoint = tools.url_parts(table_url)[1]["endpoint_url"]
    with relay_for(endpoint) as relay:
        url = tools.with_query(table_url, endpoint_url=relay.endpoint())
        with _opened(flavor, url) as old:
            assert old.spend("spent") is True
            assert old.is_spent("warm") is False
            call = getattr(old, operation)
            outcome = _recreated_while_held(lambda: call("spent"), table_url, admin, relay)
            assert isinstance(outcome, LedgerError), f"{operation} answered {outcome!r}"
            _fails_closed(old)
