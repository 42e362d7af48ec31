"""C4 and C5 under faults: silence, black holes, held locks, and secrets in errors."""

from __future__ import annotations

import re
import time
from urllib.parse import quote, unquote

import psycopg
import pytest
from psycopg import sql

from ledger_conformance.faults import Toxic
from ledger_core.errors import AmbiguousSpend, InvalidLedgerURL, LedgerError, LedgerUnavailable
from ledger_core.registry import open_ledger
from tests.servers.postgres import PostgresServer

from .conftest import Opener, on_open_links, proxied

SECRET = "s3cr3t-Pa55"
SLACK = 0.5  # seconds past the timeout for the raise to travel back


def test_black_holed_server_raises_within_the_timeout(
    open_pg: Opener, pg_server: PostgresServer
) -> None:
    with proxied(pg_server) as (proxy, _):
        proxy.set(Toxic.BLACKHOLE)
        port = proxy.address[1]
        started = time.monotonic()
        with pytest.raises(LedgerUnavailable):
            open_pg(f"postgresql://u:{SECRET}@127.0.0.1:{port}/db", timeout=2)
        assert time.monotonic() - started < 10


def test_answer_lost_after_commit_is_settled_by_the_token(
    open_pg: Opener, pg_server: PostgresServer
) -> None:
    """C5: the INSERT commits, its answer never arrives; the ledger times out, settles on
    a new connection, finds its own token and answers True (a second spend: False)."""
    with proxied(pg_server) as (proxy, url):
        ledger = open_pg(url, timeout=1, pool_min=1, pool_max=1)
        assert ledger.spend("warm-up") is True  # the pool's one connection is now open
        with on_open_links(proxy, Toxic.DROP_REPLIES):
            started = time.monotonic()
            assert ledger.spend("lost-answer") is True
            # It waited out the first attempt's share of the call's one timeout, then
            # settled in what was left: the whole call within the timeout.
            took = time.monotonic() - started
        assert proxy.stats.replies_dropped > 0  # the fault did happen
        assert 0.5 <= took < 1 + SLACK, took
        assert ledger.spend("lost-answer") is False
        assert ledger.is_spent("lost-answer") is True


def test_request_lost_before_the_server_is_recorded_by_the_settling_insert(
    open_pg: Opener, pg_server: PostgresServer
) -> None:
    """C5, the other way: the INSERT never arrives; settling records it with the same
    token, so the call that recorded it answers True, exactly once."""
    with proxied(pg_server) as (proxy, url):
        ledger = open_pg(url, timeout=1, pool_min=1, pool_max=1)
        assert ledger.spend("warm-up") is True
        with on_open_links(proxy, Toxic.BLACKHOLE):
            started = time.monotonic()
            assert ledger.spend("never-sent") is True  # on the muted link, then settled
            assert time.monotonic() - started >= 0.5  # it did wait out the first attempt
        assert ledger.spend("never-sent") is False
        assert ledger.is_spent("never-sent") is True


def test_lost_answer_on_an_id_spent_elsewhere_is_false(
    open_pg: Opener, pg_server: PostgresServer
) -> None:
    other = open_pg()
    assert other.spend("theirs") is True
    with proxied(pg_server) as (proxy, url):
        ledger = open_pg(url, timeout=1, pool_min=1, pool_max=1)
        assert ledger.spend("warm-up") is True
        with on_open_links(proxy, Toxic.DROP_REPLIES):
            assert ledger.spend("theirs") is False  # a foreign token: not ours
        assert proxy.stats.replies_dropped > 0


def test_is_spent_after_a_silenced_connection_reads_again(
    open_pg: Opener, pg_server: PostgresServer
) -> None:
    with proxied(pg_server) as (proxy, url):
        ledger = open_pg(url, timeout=1, pool_min=1, pool_max=1)
        assert ledger.spend("seen") is True
        with on_open_links(proxy, Toxic.DROP_REPLIES):
            assert ledger.is_spent("seen") is True
        assert proxy.stats.replies_dropped > 0


def test_silence_everywhere_is_ambiguous_not_a_guess(
    open_pg: Opener, pg_server: PostgresServer
) -> None:
    with proxied(pg_server) as (proxy, url):
        ledger = open_pg(url, timeout=1, pool_min=1, pool_max=1)
        assert ledger.spend("warm-up") is True
        proxy.set(Toxic.DROP_REPLIES)  # on every link, the new ones too
        started = time.monotonic()
        with pytest.raises(AmbiguousSpend):
            ledger.spend("unknowable")
        with pytest.raises(LedgerUnavailable):
            ledger.is_spent("unknowable")
        assert time.monotonic() - started < 15


def test_a_held_row_lock_fails_closed_then_spends(
    open_pg: Opener, pg_server: PostgresServer, table: str
) -> None:
    """Another transaction holds the id's unique key uncommitted: the spend waits at
    most its timeout, then raises (never False); after that transaction rolls back, the
    id is still free."""
    ledger = open_pg(timeout=1)
    insert = sql.SQL(
        "INSERT INTO {} (namespace, request_id, token) VALUES ('default', %s, 'x')"
    ).format(sql.Identifier(table))
    with psycopg.connect(pg_server.url) as holder:
        holder.execute(insert, (b"held",))  # open transaction, not committed
        with pytest.raises(LedgerUnavailable) as raised:
            ledger.spend("held")
        assert not isinstance(raised.value, AmbiguousSpend)  # the server said: rolled back
        holder.rollback()
    assert ledger.spend("held") is True


def test_password_never_shows(open_pg: Opener, pg_server: PostgresServer) -> None:
    # A closed port: the connection error must not echo the password.
    url = f"postgresql://postgres@127.0.0.1:1/postgres?password={SECRET}&bogus=1"
    with pytest.raises(LedgerError) as raised:
        open_ledger(f"postgresql://postgres:{SECRET}@127.0.0.1:1/postgres", timeout=2)
    assert SECRET not in str(raised.value)
    with pytest.raises(LedgerError) as bad:
        open_ledger(url)
    assert SECRET not in str(bad.value)
    # Trust authentication ignores the password: the ledger opens and must not show it.
    good = open_pg(pg_server.url.replace("postgres@", f"postgres:{SECRET}@"))
    assert SECRET not in repr(good.ledger)
    assert SECRET not in str(good.describe())


def test_closed_ledger_raises(open_pg: Opener) -> None:
    ledger = open_pg()
    ledger.close()
    with pytest.raises(LedgerError):
        ledger.spend("after-close")


def _chain(exc: BaseException | None) -> str:
    """Every message in an exception's chain (causes and contexts)."""
    texts = []
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        texts.append(f"{type(exc).__name__}: {exc!s} {exc!r}")
        exc = exc.__cause__ or exc.__context__
    return "\n".join(texts)


# (Unencoded "/", "?" or "#" end the authority: such a URL is malformed, and its
# redaction is ledger_core.urls' to fuzz.)
@pytest.mark.parametrize("password", ["Secr@tX9", "pa:ss@wo:rd9", "@@@zz@", "Secr%40tX9%2Fq"])
def test_a_password_with_url_delimiters_never_leaks(
    password: str, open_pg: Opener, pg_server: PostgresServer
) -> None:
    """Python splits the userinfo at the last ``@``, libpq at the first: a URL handed
    to libpq as written lost ``tX9`` into its host name, and its error. The ledger
    hands libpq the user and password as separate parameters."""
    plain = unquote(password)
    pieces = {p for p in re.split(r"[@:/]", plain) if len(p) > 2} | {plain}
    if "@" in password:  # parsers disagree where it ends: refused before any I/O
        with pytest.raises(InvalidLedgerURL, match="percent-encode the password") as refused:
            open_ledger(f"postgresql://postgres:{password}@127.0.0.1:1/postgres")
        assert not any(piece in _chain(refused.value) for piece in pieces)
        password = quote(plain, safe="")
    # A closed port: the connection error must not hold any part of the password.
    with pytest.raises(LedgerError) as raised:
        open_ledger(f"postgresql://postgres:{password}@127.0.0.1:1/postgres", timeout=2)
    text = _chain(raised.value)
    for piece in pieces | {password}:
        assert piece not in text, piece
    # The real server (trust authentication) opens, and shows nothing either.
    url = f"postgresql://postgres:{password}@{pg_server.host}:{pg_server.port}/postgres"
    ledger = open_pg(url)
    assert ledger.spend("with-delimiters") is True
    for piece in pieces | {password}:
        assert piece not in repr(ledger.ledger)
        assert piece not in str(ledger.describe())


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://u@bad..host:5/db",  # idna refuses an empty label: UnicodeError
        "postgresql://u@" + "x" * 64 + ".example:5/db",  # a label too long for idna
        "postgresql://u@127.0.0.1:5/db?port=notaport",
        "postgresql://u@127.0.0.1:5/db?connect_timeout=soon",
        "postgresql://u@127.0.0.1:5/db?sslmode=bogus",
        "postgresql://u@127.0.0.1:5/db?hostaddr=not-an-ip",
        "postgresql://u@127.0.0.1:5/db?host=a,b&port=1,2,3",
        "postgresql://u@[::1:5/db",
        "postgresql://u@h\u00e9\u00e9.invalid:5/db",
        "postgresql://u@127.0.0.1:5/db?options=%00",
    ],
)
def test_every_failure_to_open_is_a_ledger_error(flavor: str, url: str) -> None:
    from tests.flavors import Flavored

    with pytest.raises(LedgerError):
        Flavored(flavor, url, timeout=1).dispose()


def test_cli_is_spent_on_a_bad_host_is_not_an_answer(capsys: pytest.CaptureFixture[str]) -> None:
    """Exit 1 means "not spent": a crash must never read as that answer."""
    from ledger_core.cli import main as cli_main

    code = cli_main(["is-spent", "postgresql://u@bad..host:5/db", "r1"])
    assert code not in (0, 1)
    assert "Traceback" not in capsys.readouterr().err
