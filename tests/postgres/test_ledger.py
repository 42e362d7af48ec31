"""The PostgreSQL ledger's own behavior, sync and async, on a real server."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from typing import Any

import psycopg
import pytest
from psycopg import sql

from ledger_core.cli import main as cli_main
from ledger_core.errors import InvalidLedgerURL, InvalidRequestId, LedgerUnavailable
from ledger_core.registry import open_ledger
from ledger_postgres import setup, setup_async
from tests.servers.postgres import PostgresServer

from .conftest import Opener

HOSTILE_IDS = [
    "it's",
    'say "hi"',
    "back\\slash\\\\",
    "nul\x00inside",
    "\x00",
    "'); DROP TABLE decision_ledger; --",
    "%s %(x)s {} $1 ::bytea",
    "E'\\x00'",
    "a:b",
    "Straße",
    "Strasse",
    "e\u0301",  # e + combining acute: not the same id as the precomposed é
    "\u00e9",
    " padded ",
    "padded",
    "x" * 1024,
    "\U0001f600" * 256,  # 1024 UTF-8 bytes
]


def test_spend_once_then_false_and_is_spent_reads(open_pg: Opener) -> None:
    ledger = open_pg()
    assert ledger.is_spent("r1") is False
    assert ledger.spend("r1") is True
    assert ledger.spend("r1") is False
    assert ledger.is_spent("r1") is True
    assert ledger.is_spent("r2") is False  # is_spent never records
    assert ledger.spend("r2") is True


def test_hostile_ids_are_data(open_pg: Opener, admin: psycopg.Connection[Any], table: str) -> None:
    ledger = open_pg()
    for rid in HOSTILE_IDS:
        assert ledger.is_spent(rid) is False, rid
        assert ledger.spend(rid) is True, rid
    for rid in HOSTILE_IDS:
        assert ledger.spend(rid) is False, rid
        assert ledger.is_spent(rid) is True, rid
    stored = admin.execute(
        sql.SQL("SELECT request_id FROM {} WHERE namespace = %s AND request_id <> ''").format(
            sql.Identifier(table)
        ),  # the namespace's genesis row has the empty request_id
        (b"default",),
    ).fetchall()
    assert sorted(bytes(r[0]) for r in stored) == sorted(r.encode() for r in HOSTILE_IDS)


def test_spent_ids_lists_this_namespace_in_pages(
    flavor: str, open_pg: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    for flavour in ("ledger", "aio"):  # several pages, a short last
        monkeypatch.setattr(f"ledger_postgres.{flavour}.PAGE_SIZE", 3)
    ledger = open_pg(namespace="listed")
    open_pg(namespace="other").spend("not-mine")
    ids = ["b", "a", "\x00nul", "é", "e\u0301", "zz", "Z", "b:c"]
    for rid in ids:
        assert ledger.spend(rid) is True
    if flavor == "async":

        async def collect() -> list[str]:
            return [rid async for rid in ledger.ledger.spent_ids()]

        listed = ledger.run(collect())
    else:
        listed = list(ledger.ledger.spent_ids())
    assert listed == sorted(ids, key=lambda rid: rid.encode())


@pytest.mark.parametrize("bad", ["", "x" * 1025, "\ud800", b"bytes", None, 7])
def test_invalid_ids_raise_before_io(open_pg: Opener, bad: Any) -> None:
    ledger = open_pg()
    with pytest.raises(InvalidRequestId):
        ledger.spend(bad)
    with pytest.raises(InvalidRequestId):
        ledger.is_spent(bad)


def test_namespaces_are_independent(open_pg: Opener) -> None:
    a = open_pg(namespace="a")
    ab = open_pg(namespace="a:b")
    assert a.spend("b:c") is True
    assert ab.is_spent("c") is False
    assert ab.spend("c") is True
    assert a.is_spent("b:c") is True
    assert a.store_id != ab.store_id
    assert a.store_id is not None
    assert ab.store_id is not None


def test_store_id_is_shared_by_instances_and_flavors(
    open_pg: Opener, pg_server: PostgresServer, table: str
) -> None:
    first = open_pg(namespace="n")
    second = open_ledger(pg_server.url, table=table, namespace="n")
    try:
        assert getattr(second, "store_id", None) == first.store_id
    finally:
        second.close()  # type: ignore[attr-defined]
    assert first.describe().identity.startswith("pg_control_system()")


def test_dropped_and_recreated_table_gets_a_new_store_id(
    open_pg: Opener, admin: psycopg.Connection[Any], table: str
) -> None:
    before = open_pg()
    before.spend("kept?")
    old = before.store_id
    before.close()
    admin.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(table)))
    after = open_pg()
    assert after.store_id is not None
    assert after.store_id != old
    assert after.is_spent("kept?") is False


def test_other_table_and_database_differ(
    open_pg: Opener, admin: psycopg.Connection[Any], pg_server: PostgresServer, table: str
) -> None:
    here = open_pg()
    other_table = open_pg(table="other_" + table)
    assert here.store_id != other_table.store_id
    admin.execute("DROP DATABASE IF EXISTS ledger_other")
    admin.execute("CREATE DATABASE ledger_other")
    other_db = open_pg(pg_server.url_for("ledger_other"))
    assert other_db.store_id not in (here.store_id, other_table.store_id)
    system_ids = {str(x.store_id).split(":")[1] for x in (here, other_table, other_db)}
    assert len(system_ids) == 1  # one cluster; the database and table OIDs differ


def test_custom_schema_is_created_and_names_are_quoted(open_pg: Opener, table: str) -> None:
    ledger = open_pg(schema="Ledger_Schema", table="Spent_" + table)
    assert ledger.spend("x") is True
    assert f"Ledger_Schema.Spent_{table}" in ledger.describe().location


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("table", "x; drop table y"),
        ("table", 'a"b'),
        ("schema", "pg catalog"),
        ("table", "1abc"),
        ("table", "a" * 64),
        ("timeout", "0"),
        ("create", "maybe"),
        ("pool_max", "0"),
    ],
)
def test_bad_options_are_refused(pg_server: PostgresServer, option: str, value: str) -> None:
    with pytest.raises(InvalidLedgerURL):
        open_ledger(pg_server.url, **{option: value})


def test_unknown_keyword_option_is_refused(pg_server: PostgresServer) -> None:
    with pytest.raises(InvalidLedgerURL, match="unknown option"):
        open_ledger(pg_server.url, colour="blue")


def test_libpq_options_in_the_url_pass_through(open_pg: Opener, pg_server: PostgresServer) -> None:
    ledger = open_pg(pg_server.url + "?application_name=ledger-test&sslmode=disable")
    assert ledger.spend("libpq") is True


def test_tls_with_full_verification(open_pg: Opener, pg_server: PostgresServer) -> None:
    if pg_server.tls_ca is None:
        pytest.skip("the test server has no TLS certificate (openssl missing, or a URL given)")
    url = pg_server.url + f"?sslmode=verify-full&sslrootcert={pg_server.tls_ca}"
    ledger = open_pg(url)
    assert ledger.spend("over-tls") is True
    assert ledger.is_spent("over-tls") is True


def test_tls_verification_failure_is_unavailable(
    open_pg: Opener, pg_server: PostgresServer, tmp_path: Any
) -> None:
    if pg_server.tls_ca is None:
        pytest.skip("the test server has no TLS certificate (openssl missing, or a URL given)")
    wrong = tmp_path / "other-ca.crt"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=other", "-keyout", str(tmp_path / "k"), "-out", str(wrong)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    with pytest.raises(LedgerUnavailable):
        open_pg(pg_server.url + f"?sslmode=verify-full&sslrootcert={wrong}")


def test_create_false_needs_setup_then_works_for_a_least_privilege_role(
    open_pg: Opener, admin: psycopg.Connection[Any], pg_server: PostgresServer, table: str
) -> None:
    with pytest.raises(LedgerUnavailable, match="setup"):
        open_pg(create="false")
    info = setup(pg_server.url, table=table)
    assert setup(pg_server.url + f"?table={table}").store_id == info.store_id  # idempotent
    admin.execute("DROP ROLE IF EXISTS ledger_writer")
    admin.execute("CREATE ROLE ledger_writer LOGIN")
    admin.execute(
        sql.SQL("GRANT SELECT, INSERT ON {} TO ledger_writer").format(sql.Identifier(table))
    )
    try:
        ledger = open_pg(pg_server.url_for(user="ledger_writer"), create=False)
        assert ledger.spend("least") is True
        assert ledger.spend("least") is False
        assert ledger.store_id == info.store_id
    finally:
        admin.execute(sql.SQL("REVOKE ALL ON {} FROM ledger_writer").format(sql.Identifier(table)))


def test_setup_async_is_idempotent(pg_server: PostgresServer, table: str) -> None:
    first = asyncio.run(setup_async(pg_server.url, table=table, namespace="n"))
    again = asyncio.run(setup_async(pg_server.url, table=table, namespace="n"))
    assert first.store_id is not None
    assert first.store_id == again.store_id
    assert first.namespace == "n"


def test_setup_accepts_a_libpq_conninfo(pg_server: PostgresServer, table: str) -> None:
    conninfo = f"host={pg_server.host} port={pg_server.port} user={pg_server.user} dbname=postgres"
    info = setup(conninfo, table=table, schema="via_conninfo")
    assert info.store_id is not None
    assert "via_conninfo." + table in info.location


def test_fallback_identity_row_when_control_data_is_unreadable(
    flavor: str, open_pg: Opener, admin: psycopg.Connection[Any], pg_server: PostgresServer
) -> None:
    db = f"ledger_restricted_{flavor}"
    admin.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(db)))
    admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(db)))
    role = f"ledger_plain_{flavor}"
    admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
    admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    with psycopg.connect(pg_server.url_for(db), autocommit=True) as conn:
        conn.execute("REVOKE EXECUTE ON FUNCTION pg_control_system() FROM PUBLIC")
        conn.execute(sql.SQL("GRANT ALL ON SCHEMA public TO {}").format(sql.Identifier(role)))
    url = pg_server.url_for(db, user=role)
    first = open_pg(url, namespace="n")
    second = open_pg(url, namespace="n")
    info = first.describe()
    assert info.store_id is not None
    assert info.store_id.startswith("postgres-row:")
    assert "fallback" in info.identity
    assert second.store_id == first.store_id
    assert open_pg(url, namespace="m").store_id != first.store_id
    assert first.spend("x") is True
    assert second.spend("x") is False


def test_import_without_the_driver_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['psycopg'] = None; sys.modules['psycopg_pool'] = None\n"
        "import ledger_postgres\n"
        "from ledger_core.errors import MissingDriver\n"
        "from ledger_core.registry import open_ledger\n"
        "try:\n"
        "    open_ledger('postgresql://u:pw@127.0.0.1:1/db')\n"
        "except MissingDriver as exc:\n"
        "    print('missing:', exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert "decision-ledger[postgres]" in done.stdout


@pytest.mark.parametrize(
    "bad",
    [
        "postgresql://u:s3cr3t-Pw@127.0.0.1:5432/db?bogus_key=1",
        "postgresql://u@127.0.0.1:5432/db?password=s3cr3t-Pw&bogus_key=1",
    ],
)
def test_unparseable_urls_never_show_the_password(bad: str) -> None:
    with pytest.raises(InvalidLedgerURL) as raised:
        open_ledger(bad)
    assert "s3cr3t-Pw" not in str(raised.value)
    assert "bogus_key" in str(raised.value)  # libpq's reason is still shown


def test_unparseable_conninfo_never_shows_the_password() -> None:
    with pytest.raises(InvalidLedgerURL) as raised:
        setup("host=127.0.0.1 password=s3cr3t Pw")
    assert "s3cr3t" not in str(raised.value)
    assert "Pw" not in str(raised.value)


def test_hostile_ids_are_data_on_a_host_pool_too(
    pg_server: PostgresServer, admin: psycopg.Connection[Any], table: str
) -> None:
    """On a host's pool, values travel as hex bytea literals inside a script: the same
    ids must land as the same bytes, with no way out of the literal."""
    from psycopg_pool import ConnectionPool

    from ledger_postgres import PostgresLedger

    # prepare_threshold=0: the host prepares everything; a script must still run.
    # A raw cursor factory ($1 placeholders) is the host's, not the ledger's.
    kwargs = {"prepare_threshold": 0, "cursor_factory": psycopg.RawCursor}
    with ConnectionPool(pg_server.url, kwargs=kwargs, min_size=1, max_size=2) as pool:
        ledger = PostgresLedger.from_pool(pool, table=table, namespace="it's a \\ns\x00")
        for rid in HOSTILE_IDS:
            assert ledger.is_spent(rid) is False, rid
            assert ledger.spend(rid) is True, rid
            assert ledger.spend(rid) is False, rid
            assert ledger.is_spent(rid) is True, rid
        assert sorted(ledger.spent_ids()) == sorted(HOSTILE_IDS, key=str.encode)
        ledger.close()
    stored = admin.execute(
        sql.SQL("SELECT request_id FROM {} WHERE namespace = %s AND request_id <> ''").format(
            sql.Identifier(table)
        ),
        (b"it's a \\ns\x00",),
    ).fetchall()
    assert sorted(bytes(r[0]) for r in stored) == sorted(r.encode() for r in HOSTILE_IDS)


def test_cli_setup_creates_what_create_false_needs(
    open_pg: Opener, pg_server: PostgresServer, table: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = pg_server.url + f"?table={table}"
    with pytest.raises(LedgerUnavailable, match="setup"):
        open_pg(url, create="false")
    assert cli_main(["setup", url + "&create=false"]) == 0
    assert "store_id=postgres" in capsys.readouterr().out
    assert open_pg(url, create="false").spend("after-setup") is True
