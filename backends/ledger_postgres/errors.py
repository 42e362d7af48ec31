"""Driver exception -> ``LedgerError``: not sent, rejected, or an unknown outcome (C4, C5).
Every message that may quote the server or libpq passes through :func:`scrub`."""

from __future__ import annotations

import re
from urllib.parse import quote

from psycopg import Error as PgError
from psycopg import errors as pg_errors
from psycopg_pool import PoolClosed, PoolTimeout, TooManyRequests

from ledger_core.errors import (
    AmbiguousSpend,
    LedgerError,
    LedgerUnavailable,
    Outcome,
    UnsafeStoreConfig,
    missing_store,
)

_DELIMITERS = re.compile(r"[@:/?#&=%\s]+")


def secret_forms(password: str) -> list[str]:
    """Every form in which a password could be echoed, longest first: libpq and Python
    split userinfo at different ``@``, so pieces cut at a delimiter count too."""
    forms = {password, quote(password, safe="")}
    forms.update(p for p in _DELIMITERS.split(password) if len(p) >= 3)
    return sorted((f for f in forms if f), key=len, reverse=True)


def scrub(text: str, password: str | None) -> str:
    if not password:
        return text
    for form in secret_forms(password):
        text = text.replace(form, "***")
    return text


class DeadlineExceeded(Exception):
    """An operation got no answer in time; its socket was shut down (outcome unknown)."""


class OutOfTime(Exception):
    """The call's one deadline passed before this op could be sent (nothing was sent)."""


# Errors that end the session may arrive after a commit (e.g. a shutdown while waiting
# for a synchronous standby): only statement errors prove a rollback.
_SESSION_ENDING = ("08", "57P", "XX", "58")


def classify(exc: BaseException) -> Outcome:
    if isinstance(exc, (PoolTimeout, PoolClosed, TooManyRequests, OutOfTime)):
        return Outcome.NOT_SENT
    sqlstate = getattr(exc, "sqlstate", None)
    if isinstance(exc, PgError) and sqlstate and not sqlstate.startswith(_SESSION_ENDING):
        return Outcome.REJECTED
    return Outcome.UNKNOWN


def detail(exc: BaseException, password: str | None) -> str:
    return scrub(str(exc).strip() or type(exc).__name__, password)


def unavailable(what: str, exc: BaseException, password: str | None) -> LedgerError:
    if is_topology_refusal(exc):
        return UnsafeStoreConfig(
            f"{what} refused, nothing recorded: the primary's standbys no longer keep every "
            "acknowledged spend (a standby that is not synchronous, an idle physical slot, "
            "or synchronous_standby_names changed since open); it spends again once they "
            "do (see `decision-ledger doctor`)"
        )
    if isinstance(exc, pg_errors.ReadOnlySqlTransaction):
        return UnsafeStoreConfig(
            f"{what} refused: the server is read-only (a standby, or "
            f"default_transaction_read_only): {detail(exc, password)}"
        )
    text = detail(exc, password)
    if _NO_DATABASE.search(text):
        # The one server error a first set-up meets: say how to get past it.
        text += (
            "; create the database first (createdb NAME, or CREATE DATABASE as a role that "
            "may), then run `decision-ledger setup URL`: see docs/postgres.md"
        )
    return LedgerUnavailable(f"{what} failed: {text}")


# libpq's text (a connection error carries no SQLSTATE): 'database "x" does not exist'
_NO_DATABASE = re.compile(r'FATAL:\s+database "[^"]*" does not exist')


def ambiguous(first: BaseException, second: BaseException | None, pw: str | None) -> AmbiguousSpend:
    tail = "" if second is None else f"; re-reading its token failed: {detail(second, pw)}"
    return AmbiguousSpend(f"spend outcome unknown: {detail(first, pw)}{tail}")


def standby_error(what: str) -> UnsafeStoreConfig:
    return UnsafeStoreConfig(
        f"{what} refused: the server is a read-only standby (pg_is_in_recovery()); a ledger "
        "spends and reads on the primary only: add target_session_attrs=read-write to the URL"
    )


def missing_table(qualified: str) -> LedgerUnavailable:
    return missing_store(
        f"ledger table {qualified}",
        "run `decision-ledger setup URL` (or ledger_postgres.setup) as a role that may create it",
    )


def missing_genesis(qualified: str, namespace: str, why: str) -> LedgerUnavailable:
    return LedgerUnavailable(
        f"namespace {namespace!r} of ledger table {qualified} has no genesis row ({why}): "
        f"run `decision-ledger setup URL` with namespace={namespace!r} "
        "(or ledger_postgres.setup) once as the table's owner, then reopen"
    )


def missing_attempt_column(qualified: str) -> LedgerUnavailable:
    return LedgerUnavailable(
        f"spend_as refused: ledger table {qualified} has no attempt_digest column (it was "
        "created by an older version) and this ledger opened with create=false: run "
        "`decision-ledger setup URL` (or ledger_postgres.setup) once as a role that may "
        "alter it; spend and is_spent work meanwhile"
    )


class StoreChanged(UnsafeStoreConfig):
    """The store is no longer the one this ledger opened and proved; it stays failed."""


def store_changed(qualified: str) -> StoreChanged:
    return StoreChanged(
        f"ledger {qualified}: the store forgot, or can now forget, since this ledger "
        "opened (its namespace's genesis row is gone or different: the namespace's rows "
        "deleted, TRUNCATE, DROP and re-create, rows restored from a backup or written "
        "again (a new xmin); or "
        "the table is no longer logged and permanent, or fsync was turned off; or a failover "
        "changed the timeline, under failover=new-store-id); this ledger "
        "stays failed: reopen it (a store that forgot gets a new store_id)"
    )


def is_guard_failure(exc: BaseException) -> bool:
    return isinstance(exc, pg_errors.NotNullViolation) and exc.diag.column_name == "token"


def is_topology_refusal(exc: BaseException) -> bool:
    return isinstance(exc, pg_errors.NotNullViolation) and exc.diag.column_name == "namespace"
