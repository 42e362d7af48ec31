"""redis-py exceptions -> the ledger's error tree (C4): not sent, refused, or unknown
outcome; and where a ledger points, shown without any piece of a password."""

from __future__ import annotations

import re
from types import ModuleType
from urllib.parse import SplitResult

from ledger_core.errors import InvalidLedgerURL, LedgerError, LedgerUnavailable, UnsafeStoreConfig
from ledger_core.lazy import import_driver
from ledger_core.urls import LedgerURL


def redis_module() -> ModuleType:
    """redis-py, imported only when a ledger is opened."""
    parts = ["", ".asyncio", ".backoff", ".retry", ".cluster", ".sentinel"]
    parts += [".asyncio.cluster", ".asyncio.retry", ".asyncio.sentinel"]
    needs = "the Redis ledger needs redis-py"
    return import_driver("redis", needs, *(f"redis{part}" for part in parts))


IDENTITY_ERROR = "LEDGER_IDENTITY"


class ReplyLost(LedgerUnavailable):
    """A command was (maybe) sent and its reply never came; a spend resolves it (C5)."""


class IdentityLost(UnsafeStoreConfig):
    """The namespace's genesis is gone or different since open: the store forgot."""


def driver_error(exc: BaseException, what: str, *, sent: bool) -> LedgerError:
    """``sent``: the command may have reached the server (a failure is then
    :class:`ReplyLost`); an error reply means it did not apply."""
    redis = redis_module()
    exceptions = redis.exceptions
    if isinstance(exc, _not_found(redis.sentinel) + _not_found(redis.asyncio.sentinel)):
        return _no_master(exc, what)
    if isinstance(exc, exceptions.MaxConnectionsError):
        return LedgerUnavailable(f"{what}: no free connection in the client's pool")
    if isinstance(exc, exceptions.ReadOnlyError):
        return UnsafeStoreConfig(f"{what}: the server is a read-only replica ({exc})")
    if isinstance(exc, exceptions.ResponseError):
        text = str(exc)
        if text.startswith(IDENTITY_ERROR):
            if "replication" in text:
                return IdentityLost(
                    f"{what}: the store's replication changed since this ledger opened: the "
                    "server is no longer the master it was, or a replica attached to a master "
                    "that had none (a failover, a restart, REPLICAOF); spends acknowledged "
                    "before may be missing here, so this ledger stays failed closed: reopen "
                    "(a new instance gets a new store_id)"
                )
            how = "gone" if "gone" in text else "different"
            return IdentityLost(
                f"{what}: the store forgot: its identity (genesis key) is {how} since this "
                "ledger opened (FLUSHALL, eviction, a restore or failover that lost it); spent "
                "ids may be gone, so this ledger stays failed closed: reopen (a new instance "
                "gets a new store_id)"
            )
        if text.startswith("WRONGTYPE"):
            return UnsafeStoreConfig(
                f"{what}: a ledger key holds a value of the wrong type (something else "
                "wrote it); refusing to guess"
            )
        if text.startswith(("MOVED", "ASK", "CROSSSLOT", "CLUSTERDOWN")):
            return LedgerUnavailable(f"{what}: refused by a Cluster node ({text})")
        return LedgerUnavailable(f"{what}: the server refused it ({text})")
    if isinstance(exc, exceptions.AuthenticationError | exceptions.AuthorizationError):
        return LedgerUnavailable(f"{what}: authentication failed ({type(exc).__name__})")
    if sent:
        return ReplyLost(f"{what}: no reply ({type(exc).__name__}: {exc})")
    return LedgerUnavailable(f"{what}: cannot reach the server ({type(exc).__name__}: {exc})")


def _not_found(sentinel: ModuleType) -> tuple[type[Exception], ...]:
    return sentinel.MasterNotFoundError, sentinel.SlaveNotFoundError


def _no_master(exc: BaseException, what: str) -> LedgerUnavailable:
    """redis-py's text reprs every Sentinel's connection (its kwargs: the password, in
    some versions): never repeated. Only the class of what each Sentinel answered is
    kept, and the driver's exception gets the same text, so a chained cause shows ours."""
    # "<conn repr> - AuthenticationError('...')", or "- auth:AuthenticationError: ..." (8.x)
    answered = sorted(set(re.findall(r" - (?:[a-z_]+:)?([A-Z]\w*)(?=[(:])", str(exc))))
    said = f"; the Sentinels answered {', '.join(answered)}" if answered else ""
    text = (
        f"{what}: no Sentinel named a master for this ledger (check the master name in "
        "the URL, and sentinel_username / sentinel_password against the Sentinels' "
        f"requirepass){said}"
    )
    exc.args = (text,)
    return LedgerUnavailable(text)


def url_refused(url: LedgerURL, exc: Exception) -> InvalidLedgerURL:
    """redis-py's message may quote the URL, so it is never repeated."""
    return InvalidLedgerURL(f"redis-py cannot use {location(url)} ({type(exc).__name__})")


def location(url: LedgerURL) -> str:
    """Where the ledger points, from host, port and database only: a raw ``/``, ``#``
    or ``?`` in a password moves the rest of it into the path, so no piece shows."""
    p = url.parts
    host = p.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = f":{p.port}" if p.port is not None else ""
    except ValueError:  # a password piece where the port should be
        port = ""
    path = p.path
    if url.scheme == "unix":
        shown = path if "@" not in p.netloc + path and p.password is None else "/..."
    else:
        shown = path if re.fullmatch(r"/?\d*", path) else "/..."
    return f"{url.scheme}://{user(p)}{host}{port}{shown}"


def user(p: SplitResult) -> str:
    if p.username is None and p.password is None:
        return ""
    return f"{p.username or ''}{':***' if p.password is not None else ''}@"
