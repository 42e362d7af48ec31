"""A new session of the ledger's own pool that cannot PREPARE, and a session that lost
its prepared statements.

The hot statements are prepared on each session at its first use, inside the call, so
a table dropped (or a schema's privileges revoked, a column dropped) after open reaches
the caller as the server's own error, through the normal error mapping; it used to
fail the pool's session setup, which the pool retried until the caller's wait for a
connection ran out ("couldn't get a connection after N sec"). The ledgers here wait up
to 60 s for a connection, so that old behaviour could only raise a pool timeout: each
test asserts the server's reason, which the old code never produced.

A session whose statements are gone (``DISCARD ALL`` or ``DEALLOCATE`` from a pooler)
is prepared again and the statement sent once more: an ``EXECUTE`` of a statement that
does not exist never ran, so nothing can be applied twice.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import errors as pg_errors
from psycopg import sql

from ledger_core.errors import LedgerError, LedgerUnavailable
from ledger_postgres.statements import Prepared
from tests.flavors import Flavored
from tests.servers.postgres import PostgresServer

from .conftest import Opener

KEY = "k" * 16
POOL_WAIT = 60  # seconds: the old behaviour could only end in a pool timeout this long


def _open_settled(open_pg: Opener, url: str | None = None, **options: Any) -> Flavored:
    """A ledger whose pool has made its one session (it prepared nothing yet, or did
    before the test changes anything): none is still connecting in the background."""
    ledger = open_pg(url, timeout=POOL_WAIT, pool_min=1, pool_max=1, **options)
    ledger.run(ledger.ledger._pool.wait(POOL_WAIT))
    return ledger


def _new_sessions_only(ledger: Flavored) -> Flavored:
    """Close every session in the ledger's pool, as a restart or an idle timeout would,
    so that its next call runs on a session set up after whatever the test changed."""
    pool = ledger.ledger._pool
    stats = pool.get_stats()
    assert stats["pool_available"] == stats["pool_size"] >= 1
    held = [ledger.run(pool.getconn()) for _ in range(stats["pool_available"])]
    for conn in held:
        ledger.run(conn.close())
        ledger.run(pool.putconn(conn))
    return ledger


def _servers_error(ledger: Flavored, call: Any, reason: str) -> str:
    """``call`` raises a LedgerUnavailable that quotes the server's ``reason``."""
    with pytest.raises(LedgerUnavailable) as raised:
        ledger.run(call())
    message = str(raised.value)
    assert reason in message
    assert "couldn't get a connection" not in message
    assert isinstance(raised.value.__cause__, psycopg.Error)  # the driver's, chained
    return message


def _spend_as(ledger: Flavored, request_id: str) -> Any:
    return lambda: ledger.ledger.spend_as(request_id, KEY)


def _calls(ledger: Flavored) -> list[Any]:
    return [lambda: ledger.ledger.spend("x"), lambda: ledger.ledger.is_spent("x")]


def test_a_table_dropped_after_open_raises_the_servers_error_on_a_new_session(
    open_pg: Opener, admin: psycopg.Connection[Any], table: str
) -> None:
    ledger = _open_settled(open_pg)
    admin.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(table)))
    _new_sessions_only(ledger)
    for call in [*_calls(ledger), _spend_as(ledger, "x")]:
        message = _servers_error(ledger, call, "does not exist")
        assert table in message
    # Re-created by someone else: a new store, which this ledger never answers for.
    open_pg()
    with pytest.raises(LedgerError, match="reopen"):
        ledger.spend("x")


def test_revoked_schema_privileges_raise_the_servers_error_on_a_new_session(
    flavor: str,
    open_pg: Opener,
    admin: psycopg.Connection[Any],
    pg_server: PostgresServer,
    table: str,
) -> None:
    schema, role = f"s_revoked_{flavor}", f"ledger_revoked_{flavor}"
    ident, who = sql.Identifier(schema), sql.Identifier(role)
    admin.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(ident))
    admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(who))
    admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(who))
    try:
        open_pg(schema=schema).close()  # created by the owner
        admin.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(ident, who))
        qualified = sql.Identifier(schema, table)
        admin.execute(sql.SQL("GRANT SELECT, INSERT ON {} TO {}").format(qualified, who))
        url = pg_server.url_for(user=role)
        ledger = _open_settled(open_pg, url, schema=schema, create=False)
        admin.execute(sql.SQL("REVOKE USAGE ON SCHEMA {} FROM {}").format(ident, who))
        _new_sessions_only(ledger)
        for call in _calls(ledger):
            _servers_error(ledger, call, "permission denied")
        ledger.close()
    finally:
        admin.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(ident))
        admin.execute(sql.SQL("DROP OWNED BY {}").format(who))
        admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(who))


def test_a_dropped_column_fails_only_the_statement_that_needs_it(
    open_pg: Opener, admin: psycopg.Connection[Any], table: str
) -> None:
    """Each hot statement is prepared on its own: a table that lost C10's column still
    spends and reads; ``spend_as`` raises the server's reason, never a pool timeout."""
    ledger = _open_settled(open_pg)
    admin.execute(
        sql.SQL("ALTER TABLE {} DROP COLUMN attempt_digest").format(sql.Identifier(table))
    )
    _new_sessions_only(ledger)
    assert ledger.spend("x") is True
    assert ledger.spend("x") is False
    assert ledger.is_spent("x") is True
    _servers_error(ledger, _spend_as(ledger, "y"), "attempt_digest")
    assert ledger.is_spent("y") is False  # nothing was recorded


def _pooled(ledger: Flavored) -> Iterator[Any]:
    """The one session of a ``pool_max=1`` ledger, taken from its pool and given back."""
    pool = ledger.ledger._pool
    conn = ledger.run(pool.getconn())
    try:
        yield conn
    finally:
        ledger.run(pool.putconn(conn))


def _on_session(ledger: Flavored, statement: str) -> Any:
    for conn in _pooled(ledger):
        cur = conn.execute(statement)
        if ledger.loop is not None:
            cur = ledger.run(cur)
            return ledger.run(cur.fetchone()) if cur.description else None
        return cur.fetchone() if cur.description else None
    raise AssertionError("unreachable")


@pytest.mark.parametrize("reset", ["DISCARD ALL", "DEALLOCATE ALL"])
def test_statements_gone_from_a_live_session_are_prepared_again_and_sent_once(
    open_pg: Opener, reset: str
) -> None:
    """A pooler's reset took the session's statements: each call prepares again and
    answers as if nothing happened. A fresh id answers True: had the EXECUTE that found
    no statement run anyway, the one sent after preparing would have answered False."""
    ledger = open_pg(timeout=POOL_WAIT, pool_min=1, pool_max=1)
    assert ledger.spend("before") is True
    assert ledger.run(ledger.ledger.spend_as("before-as", KEY)) is True
    settings = _on_session(ledger, "SHOW statement_timeout")
    _on_session(ledger, reset)
    assert ledger.spend("fresh") is True
    assert ledger.spend("fresh") is False
    _on_session(ledger, reset)
    assert ledger.is_spent("fresh") is True
    assert ledger.is_spent("never") is False
    _on_session(ledger, reset)
    assert ledger.run(ledger.ledger.spend_as("fresh-as", KEY)) is True
    assert ledger.run(ledger.ledger.spend_as("fresh-as", KEY)) is True  # re-entry
    assert ledger.run(ledger.ledger.spend_as("fresh-as", "o" * 16)) is False
    # The session's settings (statement timeout, durable commit) came back with them.
    assert _on_session(ledger, "SHOW statement_timeout") == settings
    assert _on_session(ledger, "SHOW synchronous_commit") == ("on",)


# Counts, on the session, how often a hot statement was prepared: every send after the
# first goes through a new PREPARE, so the count is the number of sends.
_COUNT_PREPARES = (
    "SELECT set_config('ledger_test.prepares', (coalesce(nullif(current_setting("
    "'ledger_test.prepares', true), ''), '0')::int + 1)::text, false)"
)


def _prepares(ledger: Flavored) -> int:
    row = _on_session(ledger, "SELECT current_setting('ledger_test.prepares', true)")
    return int(row[0] or 0)


@pytest.mark.parametrize("call", ["spend", "spend_as", "is_spent"])
def test_a_statement_gone_twice_fails_closed_after_one_resend(open_pg: Opener, call: str) -> None:
    """A hot statement is sent once more only after the server said it does not exist
    (nothing ran), and only once: gone again, the call raises the server's error (never
    a settle, never True or False). Here the session's PREPARE never makes the name."""
    ledger = open_pg(timeout=POOL_WAIT, pool_min=1, pool_max=1)
    attribute = {"spend": "spend_prepared", "spend_as": "spend_as_prepared"}
    name = attribute.get(call, "is_spent_prepared")
    st = ledger.ledger._st
    setattr(st, name, Prepared(b"decision_ledger_never_prepared", _COUNT_PREPARES.encode()))
    method = (
        _spend_as(ledger, "r") if call == "spend_as" else lambda: getattr(ledger.ledger, call)("r")
    )
    with pytest.raises(LedgerUnavailable, match="does not exist") as raised:
        ledger.run(method())
    assert isinstance(raised.value.__cause__, pg_errors.InvalidSqlStatementName)
    assert _prepares(ledger) == 2  # the first send, and one more


def test_other_rejections_are_never_resent(open_pg: Opener) -> None:
    ledger = open_pg(timeout=POOL_WAIT, pool_min=1, pool_max=1)
    failing = (
        f"{_COUNT_PREPARES}; PREPARE decision_ledger_failing (bytea, bytea, bytea) AS "
        "SELECT 1 / (length($1) - length($1))"
    )
    ledger.ledger._st.spend_prepared = Prepared(b"decision_ledger_failing", failing.encode())
    with pytest.raises(LedgerUnavailable, match="division by zero"):
        ledger.spend("r")
    assert _prepares(ledger) == 1


def test_the_hot_calls_open_no_psycopg_cursor(
    open_pg: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    """spend, spend_as and is_spent on the own pool's sessions go straight through libpq:
    the same prepared statements through psycopg's cursor cut the bench's ledger/raw by
    0.1-0.8 (docs/notes/driver-internals.md)."""
    made: list[type] = []
    for cls in (psycopg.Cursor, psycopg.AsyncCursor):

        def counting(self: Any, *args: Any, _init: Any = cls.__init__, **kwargs: Any) -> None:
            made.append(type(self))
            _init(self, *args, **kwargs)

        monkeypatch.setattr(cls, "__init__", counting)
    ledger = open_pg(timeout=POOL_WAIT, pool_min=1, pool_max=1)
    made.clear()  # opening reads and writes the genesis through a cursor
    assert ledger.spend("a") is True
    assert ledger.spend("a") is False
    assert ledger.is_spent("a") is True
    assert ledger.run(ledger.ledger.spend_as("b", KEY)) is True
    assert made == []
