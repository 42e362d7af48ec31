"""The one error tree every ledger raises.

A ledger fails closed (C4): anything it cannot prove is raised as a ``LedgerError``
subclass, with the driver's own exception chained as ``__cause__``. A host catches
``LedgerError`` and never has to know which driver sits underneath.
"""

from __future__ import annotations

import shlex
from enum import Enum


class Outcome(Enum):
    """What a driver's failure says of a write (C4, C5), as a backend classifies it."""

    NOT_SENT = "not sent"  # nothing reached the server
    REJECTED = "rejected"  # the server answered with an error: nothing was written
    UNKNOWN = "unknown"  # lost or timed out after sending: it may have been applied


class LedgerError(Exception):
    """Root of every error a ledger raises on purpose."""


class InvalidRequestId(LedgerError, ValueError):
    """The request id is not a 1..1024-byte UTF-8 string (C8). Raised before any I/O."""


class InvalidLedgerURL(LedgerError, ValueError):
    """A ledger URL or option cannot be understood. The message never shows a password."""


class UnknownScheme(InvalidLedgerURL):
    """No backend is registered for the URL's scheme."""


class MissingDriver(LedgerError, ImportError):
    """The backend's optional driver is not installed (the message names the extra)."""


class BackendLoadError(MissingDriver):
    """A scheme's entry point could not be loaded (a broken install, a wrong object path);
    a :class:`MissingDriver`, so whoever handles a missing driver handles this one too."""


class LedgerUnavailable(LedgerError):
    """The store could not be reached or refused the operation; nothing was proven."""


class AmbiguousSpend(LedgerUnavailable):
    """A spend's write may or may not have landed, and re-reading could not tell (C5):
    treat the id as possibly spent (the tool does not run; ``is_spent`` decides later, H2)."""


class UnsafeStoreConfig(LedgerError):
    """The store cannot keep the promise asked of it (a spend on a read-only replica); a
    ledger that merely *cannot prove* reports ``store_id = None`` with the reason instead."""


class InvalidAnswer(LedgerError, TypeError):
    """A person's answer that is not one of the accepted forms (``True``/``False``):
    refused before anything is spent, so the person can still answer (a ``"yes"`` must
    not be spent as a denial, nor a denial read as a run)."""


class LedgerClosed(LedgerError):
    """The ledger was closed; open a new one."""


class ScratchRefused(LedgerError, ValueError):
    """A ``remove_scratch`` prefix that is not a check's own scratch prefix: nothing was
    touched (a ledger never deletes records, C2; only ``decision-ledger check``'s own
    ``ledger-conformance-<token>-`` namespaces may be removed)."""


SETUP = "run `decision-ledger setup URL` (or open with create=true) to create it"


def missing_store(what: str, how: str = SETUP) -> LedgerUnavailable:
    """Every backend's one message for a store ``create=false`` may not make: what is
    missing and where, then how to create it (a mistyped URL must never make a store)."""
    error = LedgerUnavailable(
        f"{what} does not exist and create=false (reads and migration sources never "
        f"create a store): {how}"
    )
    # What ``setup`` would create, and how: ``decision-ledger doctor`` says so, and still
    # checks the server's settings (:func:`missing_of`).
    error.missing = (what, how)  # type: ignore[attr-defined]
    return error


def missing_of(error: BaseException) -> tuple[str, str] | None:
    """``(what, how)`` when ``error`` says a store does not exist (:func:`missing_store`)."""
    found = getattr(error, "missing", None)
    if isinstance(found, tuple) and len(found) == 2 and all(isinstance(x, str) for x in found):
        return found[0], found[1]
    return None


def missing_namespace(namespace: str, where: str) -> LedgerUnavailable:
    """:func:`missing_store` for a namespace without its genesis in a store that exists:
    a mistyped namespace must refuse as a mistyped path does, never read "not spent"."""
    how = (
        f"run `decision-ledger setup URL --namespace {shlex.quote(namespace)}` "
        "(or open with create=true) to create it"
    )
    return missing_store(f"namespace {namespace!r} {where}", how)
