"""The Sentinels' own password: given apart from the master's, and never shown.

Before: there was no way to give it; ``?sentinels=:PASSWORD@host:port`` was read as a
host name, and the password showed in the ``LedgerUnavailable`` text (redis-py's
``MasterNotFoundError`` text reprs every Sentinel connection), in ``store-id`` and
``doctor`` output and in the ledger's ``location``. Against a real ``redis-sentinel``
with ``requirepass``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
import redis.sentinel

from ledger_core import InvalidLedgerURL, LedgerError, LedgerUnavailable, open_ledger
from ledger_core.cli import main
from ledger_core.opening import OpenRequest
from ledger_core.registry import open_async_ledger
from ledger_redis.errors import driver_error
from ledger_redis.options import parse
from tests.quiet_open import NONE, warnings_on_open
from tests.servers import redis as servers
from tests.servers.common import serve_or_skip

PASSWORD = "Sntl-S3cret-pw"
WRONG = "Wr0ng-Sntl-guess"


def _texts(exc: BaseException) -> str:
    """The exception's text and that of every exception chained to it."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    out: list[str] = []
    while todo:
        current = todo.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        out.append(f"{current} {current.args!r}")
        todo += [current.__cause__, current.__context__]
    return "\n".join(out)


@pytest.fixture(scope="module")
def sentinel_url() -> Iterator[str]:
    yield from serve_or_skip(lambda: servers.local_sentinel(PASSWORD))


def test_the_sentinel_options_reach_redis_py_and_show_nowhere() -> None:
    url = f"redis+sentinel://h1:26379/prod?sentinels=h2:26380&sentinel_password={PASSWORD}"
    target = parse(OpenRequest.build(url, sentinel_username="watcher"))
    assert target.sentinel_auth == {"username": "watcher", "password": PASSWORD}
    assert PASSWORD not in target.driver_url  # not the master's: the driver never sees it
    assert PASSWORD not in f"{target!r} {target.location} {target.options!r}"


@pytest.mark.parametrize(
    "url",
    [
        f"redis+sentinel://h1:26379/prod?sentinels=:{PASSWORD}@h2:26380",
        f"redis+sentinel://h1:26379/prod?sentinels=h3,user:{PASSWORD}@h2:26380",
        f"redis+sentinel://h1:26379/prod?sentinels=:{PASSWORD}@h2",
    ],
)
def test_userinfo_in_a_sentinel_address_is_refused_before_any_io(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(InvalidLedgerURL, match="sentinel_password") as caught:
        open_ledger(url)
    assert PASSWORD not in _texts(caught.value)
    assert main(["store-id", url]) == 2
    err = capsys.readouterr().err
    assert "sentinel_password" in err
    assert PASSWORD not in err


@pytest.mark.parametrize(
    ("url", "options", "match"),
    [
        (f"redis://h:6379/0?sentinel_password={PASSWORD}", {}, "redis\\+sentinel:// URLs only"),
        ("redis://h:6379/0", {"sentinel_username": "u"}, "redis\\+sentinel:// URLs only"),
        ("redis+sentinel://h:26379/m", {"sentinel_username": "u"}, "needs 'sentinel_password'"),
        ("redis+sentinel://h:26379/m", {"sentinel_password": 7}, "must be text"),
    ],
)
def test_misplaced_sentinel_options_are_refused(
    url: str, options: dict[str, object], match: str
) -> None:
    with pytest.raises(InvalidLedgerURL, match=match) as caught:
        open_ledger(url, **options)
    assert PASSWORD not in _texts(caught.value)


def test_a_master_not_found_text_is_never_repeated() -> None:
    """redis-py (some versions) reprs each Sentinel connection with its password."""
    pool = f"<redis.client.Redis(<Pool(<Connection(host=h,port=1,password={PASSWORD})>)>)>"
    for flavour, answer in (
        (redis.sentinel, "AuthenticationError('invalid')"),  # redis-py 5
        (redis.asyncio.sentinel, "auth:AuthenticationError: invalid"),  # redis-py 8
    ):
        raw = flavour.MasterNotFoundError(f"No master found for 'prod' : {pool} - {answer}")
        mapped = driver_error(raw, "open", sent=False)
        assert isinstance(mapped, LedgerUnavailable)
        assert "no Sentinel named a master" in str(mapped)
        assert "AuthenticationError" in str(mapped)
        assert PASSWORD not in str(mapped)
        assert PASSWORD not in str(raw)


def _assert_opens(url: str, **options: str) -> None:
    ledger: Any = open_ledger(url, namespace="sentinel-auth", **options)
    with ledger:
        assert ledger.spend("auth-1") in (True, False)
        assert ledger.is_spent("auth-1") is True
        shown = f"{ledger!r} {ledger.describe()!r} {ledger.describe().location}"
        assert PASSWORD not in shown


def test_the_right_password_opens_by_url_and_by_keyword(sentinel_url: str) -> None:
    _assert_opens(f"{sentinel_url}?sentinel_password={PASSWORD}")
    _assert_opens(sentinel_url, sentinel_password=PASSWORD)
    _assert_opens(f"{sentinel_url}?sentinel_username=default&sentinel_password={PASSWORD}")


def test_the_async_ledger_takes_it_too(sentinel_url: str) -> None:
    async def run() -> None:
        ledger: Any = await open_async_ledger(sentinel_url, sentinel_password=PASSWORD)
        try:
            assert await ledger.spend("auth-async") in (True, False)
            assert await ledger.is_spent("auth-async") is True
            assert PASSWORD not in f"{ledger!r} {ledger.describe()!r}"
        finally:
            await ledger.aclose()

    asyncio.run(run())


@pytest.mark.parametrize("given", ["none", "url", "keyword"])
def test_a_wrong_or_missing_password_fails_closed_and_shows_nothing(
    sentinel_url: str, given: str
) -> None:
    url = f"{sentinel_url}?sentinel_password={WRONG}" if given == "url" else sentinel_url
    options = {"sentinel_password": WRONG} if given == "keyword" else {}
    with pytest.raises(LedgerUnavailable, match="no Sentinel named a master") as caught:
        open_ledger(url, **options)
    text = _texts(caught.value)
    assert WRONG not in text
    assert PASSWORD not in text
    assert "Connection(" not in text  # no driver repr of a connection, at any link
    assert "sentinel_password" in text  # says what to check
    if given != "none":
        assert "AuthenticationError" in text


def test_async_failure_is_the_same(sentinel_url: str) -> None:
    async def run() -> None:
        with pytest.raises(LedgerUnavailable, match="no Sentinel named a master") as caught:
            await open_async_ledger(sentinel_url, sentinel_password=WRONG)
        assert WRONG not in _texts(caught.value)
        assert "Connection(" not in _texts(caught.value)

    asyncio.run(run())


@pytest.mark.parametrize("command", ["store-id", "doctor", "is-spent"])
def test_the_cli_never_shows_it(
    sentinel_url: str, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    good = f"{sentinel_url}?sentinel_password={PASSWORD}&namespace=sentinel-auth"
    bad = f"{sentinel_url}?sentinel_password={WRONG}&namespace=sentinel-auth"
    extra = ["auth-1"] if command == "is-spent" else []
    main(["setup", good])
    assert main([command, good, *extra]) in (0, 1)
    assert main([command, bad, *extra]) == 3
    out, err = capsys.readouterr()
    assert PASSWORD not in out + err
    assert WRONG not in out + err
    assert "no Sentinel named a master" in err


def test_an_error_is_a_ledger_error(sentinel_url: str) -> None:
    with pytest.raises(LedgerError):
        open_ledger(f"{sentinel_url.rpartition('/')[0]}/no-such-master?sentinel_password=x")


def test_opening_warns_of_nothing(sentinel_url: str) -> None:
    url = f"{sentinel_url}?sentinel_password={PASSWORD}"
    assert warnings_on_open(url, namespace="sentinel-auth") == NONE
