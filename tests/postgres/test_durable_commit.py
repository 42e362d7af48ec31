"""A spend's commit is synchronous whatever the pool's session has come to say.

The own pool sets ``synchronous_commit = on`` once per session, but a pooler can take
session settings away after that (``RESET ALL``, ``DISCARD ALL``; in transaction mode
each transaction may run on a server connection with the server's defaults), and the
role or database may default to ``off``. A spend then committed asynchronously while
the ledger claimed machine-crash durability. Each writing statement now sets
``synchronous_commit`` for its own transaction. (``DISCARD ALL`` also takes the
prepared statements, whose re-preparing sends the settings again: not a case here.)

The observable: ``synchronous_standby_names`` names a standby that never connects. A
commit then waits (``wait_event = 'SyncRep'``) only when ``synchronous_commit`` read
by that very commit is above ``local``, and such a commit flushed its WAL before
waiting (``RecordTransactionCommit``); with ``off`` it returns at once. So a spend
seen waiting in ``SyncRep`` proves its own commit was synchronous. Before the fix,
every call here returned without waiting (the test fails on "committed without
waiting"). Releasing the requirement lets the waiting commit finish normally.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from psycopg import sql

from tests.flavors import Flavored
from tests.servers.postgres import PostgresServer

from .conftest import Opener
from .test_sessions import _on_session, _pooled

KEY = "k" * 16
WAIT = 60.0  # seconds: a bound on waits for the server, never an asserted duration
ABSENT = "decision_ledger_absent_standby"


@pytest.fixture
def lazy_url(admin: psycopg.Connection[Any], pg_server: PostgresServer) -> Iterator[str]:
    """A role whose sessions default to ``synchronous_commit = off``."""
    name = f"ledger_lazy_{uuid.uuid4().hex[:8]}"
    role = sql.Identifier(name)
    admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(role))
    admin.execute(sql.SQL("ALTER ROLE {} SET synchronous_commit = off").format(role))
    admin.execute(sql.SQL("GRANT CREATE ON SCHEMA public TO {}").format(role))
    try:
        yield pg_server.url_for(user=name)
    finally:
        admin.execute(sql.SQL("DROP OWNED BY {} CASCADE").format(role))
        admin.execute(sql.SQL("DROP ROLE {}").format(role))


def _wait_event(admin: psycopg.Connection[Any], pid: int) -> str | None:
    row = admin.execute("SELECT wait_event FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()
    return None if row is None else row[0]


def _waits_in_syncrep(admin: psycopg.Connection[Any], pid: int, done: threading.Event) -> bool:
    """True once ``pid`` waits for the absent standby; False if its call ended first."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        if _wait_event(admin, pid) == "SyncRep":
            return True
        if done.wait(0.02):
            return _wait_event(admin, pid) == "SyncRep"
    raise AssertionError(f"neither waiting nor answered after {WAIT} s")


@contextmanager
def _standby_required(admin: psycopg.Connection[Any], url: str) -> Iterator[None]:
    """Synchronous commits wait for a standby that never comes, until released."""
    admin.execute("CREATE TABLE IF NOT EXISTS decision_ledger_probe (x int)")
    admin.execute(sql.SQL("ALTER SYSTEM SET synchronous_standby_names = {}").format(ABSENT))
    admin.execute("SELECT pg_reload_conf()")
    try:
        # The checkpointer applies the reload on its own time: a probe commit with
        # synchronous_commit = on waits once it has (one that does not is let through).
        with psycopg.connect(url, autocommit=True) as probe:
            probe.execute("SET synchronous_commit = on")
            pid, deadline = probe.info.backend_pid, time.monotonic() + WAIT
            while True:
                assert time.monotonic() < deadline, "the standby requirement never applied"
                done = threading.Event()
                worker = threading.Thread(target=_run, args=(probe, done))
                worker.start()
                waiting = _waits_in_syncrep(admin, pid, done)
                if waiting:  # a cancelled wait: committed locally, with a warning
                    admin.execute("SELECT pg_cancel_backend(%s)", (pid,))
                worker.join()
                if waiting:
                    break
        yield
    finally:
        _release(admin)
        admin.execute("DROP TABLE decision_ledger_probe")


def _run(probe: psycopg.Connection[Any], done: threading.Event) -> None:
    try:
        probe.execute("INSERT INTO decision_ledger_probe VALUES (1)")
    finally:
        done.set()


def _release(admin: psycopg.Connection[Any]) -> None:
    admin.execute("ALTER SYSTEM RESET synchronous_standby_names")
    admin.execute("SELECT pg_reload_conf()")


def _calls(ledger: Flavored) -> dict[str, Callable[[], Any]]:
    return {
        "spend": lambda: ledger.ledger.spend("fresh"),
        "spend_as": lambda: ledger.ledger.spend_as("fresh-as", KEY),
        # The same key again: the re-entry path, an UPDATE of the stored row (a write).
        "spend_as again": lambda: ledger.ledger.spend_as("before-as", KEY),
        "spend_many": lambda: ledger.ledger.spend_many(["m1", "m2"]),
    }


@pytest.mark.parametrize("lost", ["RESET ALL", "SET synchronous_commit = off"])
@pytest.mark.parametrize("call", ["spend", "spend_as", "spend_as again", "spend_many"])
def test_a_spend_commits_synchronously_after_the_session_lost_its_settings(
    lazy_url: str,  # set up first, so torn down after the ledger closed
    open_pg: Opener,
    admin: psycopg.Connection[Any],
    pg_server: PostgresServer,
    lost: str,
    call: str,
) -> None:
    ledger = open_pg(lazy_url, timeout=WAIT, pool_min=1, pool_max=1)
    # Every statement prepared on the session before it loses its settings (a first
    # use sends them again with the PREPARE).
    assert ledger.run(ledger.ledger.spend_as("before-as", KEY)) is True
    assert ledger.spend("before") is True
    assert ledger.run(ledger.ledger.spend_many(["before-many"])) == [True]
    for conn in _pooled(ledger):  # the pool's one session, where the spends run
        pid = conn.info.backend_pid
    _on_session(ledger, lost)
    assert _on_session(ledger, "SHOW synchronous_commit") == ("off",)
    answers: list[Any] = []
    done = threading.Event()

    def spend() -> None:
        try:
            answers.append(ledger.run(_calls(ledger)[call]()))
        finally:
            done.set()

    with _standby_required(admin, pg_server.url):
        worker = threading.Thread(target=spend)
        worker.start()
        try:
            waited = _waits_in_syncrep(admin, pid, done)
        finally:
            _release(admin)
            worker.join(WAIT)
    assert waited, f"{call} committed without waiting for a synchronous commit"
    assert answers == [[True, True] if call == "spend_many" else True]
    # Transaction-local: the session's own setting is as the pooler left it.
    assert _on_session(ledger, "SHOW synchronous_commit") == ("off",)
