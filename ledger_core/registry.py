"""Open a ledger from a URL, through a registry of schemes.

Schemes come from the entry-point group ``decision_ledger.backends`` (built-in ones too,
so a third party's scheme is a peer of ours) and from :func:`register_backend`, which
wins. A backend is imported only when its scheme is opened.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
from collections.abc import Callable, Mapping
from importlib.metadata import entry_points, packages_distributions
from typing import Any, Literal, Protocol, overload

from . import notices
from .errors import (
    BackendLoadError,
    InvalidLedgerURL,
    LedgerError,
    LedgerUnavailable,
    MissingDriver,
    UnknownScheme,
)
from .opening import LocalFaults, OpenRequest, Route, adapt_backend
from .protocol import (
    AsyncDecisionLedger,
    DecisionLedger,
    LedgerInfo,
    aclose_ledger,
    close_ledger,
    describe,
)
from .runs import allow_incomplete as waive_check
from .runs import check_opening, check_opening_async
from .urls import LedgerURL, scrub, scrub_exception, secret_fragments

ENTRY_POINT_GROUP = "decision_ledger.backends"


class Backend(Protocol):
    """What an entry point names: opens sync and async ledgers from one typed request.
    Optional: ``setup(request) -> LedgerInfo`` and ``testing = "module:attr"`` (the lazy
    home of its test hooks, :func:`testing_hook`). See ``docs/backends.md``."""

    def open(self, request: OpenRequest) -> DecisionLedger: ...

    async def open_async(self, request: OpenRequest) -> AsyncDecisionLedger: ...


_registered: dict[str, Backend] = {}
_lock = threading.Lock()


def register_backend(scheme: str, backend: Backend) -> None:
    """Register ``backend`` for ``scheme`` in this process (overrides entry points)."""
    adapted = adapt_backend(backend, f"the backend registered for {scheme}://")
    with _lock:
        _registered[scheme.lower()] = adapted


def available_schemes() -> list[str]:
    """Every scheme this process can open: registered ones and entry points."""
    names = {ep.name.lower() for ep in entry_points(group=ENTRY_POINT_GROUP)}
    with _lock:
        names.update(_registered)
    return sorted(names)


def backend_for(scheme: str) -> Backend:
    with _lock:
        found = _registered.get(scheme)
    if found is not None:
        return found
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name.lower() == scheme:
            return _load(scheme, ep.name, ep.value, ep.load)
    raise UnknownScheme(
        f"no ledger backend for scheme {scheme!r} (available: {', '.join(available_schemes())})"
    )


def _import(where: str, load: Callable[[], Any], reference: object) -> Any:
    """``load()`` of ``reference`` (``module:attribute``); whatever goes wrong is a
    ``LedgerError`` naming ``where``. Only a driver missing under one of our own
    packages is fixed by an extra: a module or attribute of the reference that is not
    there is a typo or an uninstalled package, and says so."""
    module, _, attribute = str(reference).partition(":")
    try:
        return load()
    except MissingDriver:
        raise
    except ImportError as exc:
        missing = getattr(exc, "name", None) or ""
        if missing and (module == missing or module.startswith(missing + ".")):
            raise BackendLoadError(
                f"{where}: module {missing!r} was not found (check the spelling of the "
                "reference, and that its package is installed)"
            ) from exc
        fix = (
            "install its extra, e.g. pip install 'decision-ledger[all]'"
            if _ours(module)
            else f"install what {module!r} needs"
        )
        raise MissingDriver(f"{where} could not be imported ({exc}); {fix}") from exc
    except AttributeError as exc:
        raise BackendLoadError(
            f"{where}: {exc} (check the spelling of {attribute!r} in the reference)"
        ) from exc
    except Exception as exc:
        raise BackendLoadError(f"{where} could not be loaded: {type(exc).__name__}: {exc}") from exc


def _ours(module: str) -> bool:
    """Whether ``module`` is of this distribution (its drivers come with an extra)."""
    shipped = packages_distributions().get(module.partition(".")[0], [])
    return "decision-ledger" in shipped


def _load(scheme: str, name: str, value: str, load: Callable[[], Any]) -> Backend:
    where = f"the backend for {scheme}:// (entry point {name} = {value})"
    loaded = _import(where, load, value)
    if not callable(getattr(loaded, "open", None)):
        raise BackendLoadError(f"{where} names {type(loaded).__name__}, which has no open()")
    backend: Backend = adapt_backend(loaded, where)
    return backend


HookName = Literal["reroute", "local_faults", "remove_scratch"]


@overload
def testing_hook(
    scheme: str, name: Literal["reroute"]
) -> Callable[[LedgerURL, Route], str | None] | None: ...
@overload
def testing_hook(
    scheme: str, name: Literal["local_faults"]
) -> Callable[[LedgerURL], LocalFaults | None] | None: ...
@overload
def testing_hook(
    scheme: str, name: Literal["remove_scratch"]
) -> Callable[[LedgerURL, str], int] | None: ...
def testing_hook(scheme: str, name: HookName) -> Callable[..., Any] | None:
    """The backend's test or operations hook ``name`` for ``scheme``, or ``None``.

    Looked up on what its ``testing = "module:attr"`` names (imported only now: opening a
    ledger never loads test support), else on the backend itself. A reference that
    cannot be loaded is a ``LedgerError``, never "no hook" (a clause passed unexercised).
    """
    backend = backend_for(scheme.lower())
    reference = getattr(backend, "testing", None)
    owners: list[object] = [backend]
    if reference is not None:
        where = f"the testing hooks of {scheme}:// ({reference!r})"
        owners.insert(0, _import(where, lambda: _resolve(reference), reference))
    for owner in owners:
        found: object = getattr(owner, name, None)
        if callable(found):
            return found
    return None


def _resolve(reference: object) -> Any:
    if not isinstance(reference, str) or reference.count(":") != 1:
        raise TypeError("testing must be a 'module:attribute' string")
    module, _, attribute = reference.partition(":")
    return getattr(importlib.import_module(module), attribute)


def _opening_failure(parsed: LedgerURL, exc: Exception) -> BaseException:
    """What to raise for an error out of a backend's open or setup: a ``LedgerError``
    (a raw one is wrapped, its outcome unknown) with no secret of the URL anywhere in
    it or in what it chains."""
    clean = scrub_exception(exc, parsed.raw)
    if isinstance(clean, LedgerError):
        return clean
    text = scrub(str(clean), secret_fragments(parsed.raw))
    failure = LedgerUnavailable(
        f"opening {parsed} failed: {type(exc).__name__}: {text}".rstrip(": ")
    )
    failure.__cause__ = clean
    return failure


def _prepare(url: str, options: Mapping[str, Any]) -> tuple[Backend, OpenRequest]:
    request = OpenRequest.build(url, **options)
    return backend_for(request.url.scheme), request


def _allow_incomplete(options: dict[str, Any]) -> bool:
    """Take ``allow_incomplete`` out of the keyword options (never a URL option: a
    backend refuses it there as unknown). Only a real bool counts."""
    value = options.pop("allow_incomplete", False)
    if type(value) is not bool:
        raise InvalidLedgerURL(f"allow_incomplete must be True or False, not {value!r}")
    return value


def open_ledger(url: str, **options: Any) -> DecisionLedger:
    """Open a sync ledger, e.g. ``open_ledger("sqlite:///ledger.db", namespace="prod")``.

    ``create=False`` makes a missing store :class:`LedgerUnavailable` (default: create
    it). A store that never proves, or one this open created, is logged once per process
    on the ``decision_ledger`` logger. A store with an unfinished migration into it is
    refused (``IncompleteMigration``) unless ``allow_incomplete=True``: a keyword, never
    a URL option, so a host's configuration cannot turn it on by accident. Every error
    is a ``LedgerError`` that shows no secret of ``url``.
    """
    allow_incomplete = _allow_incomplete(options)
    backend, request = _prepare(url, options)
    try:
        ledger = backend.open(request)
    except Exception as exc:
        failure = _opening_failure(request.url, exc)
    else:
        try:
            if not allow_incomplete:
                check_opening(ledger, str(request.url))
                notices.never_proves(describe(ledger))
            waive_check(ledger)  # checked now (or waived): its first answer need not again
            return ledger
        except BaseException as exc:
            with contextlib.suppress(Exception):  # the refusal is what is raised
                close_ledger(ledger)
            failure = _opening_failure(request.url, exc) if isinstance(exc, Exception) else exc
    raise failure  # outside the except block: nothing unscrubbed rides on __context__


async def open_async_ledger(url: str, **options: Any) -> AsyncDecisionLedger:
    """Open an async ledger: connected, its ``store_id`` known, when this returns
    (``allow_incomplete``: see :func:`open_ledger`)."""
    allow_incomplete = _allow_incomplete(options)
    backend, request = _prepare(url, options)
    try:
        ledger = await backend.open_async(request)
    except Exception as exc:
        failure = _opening_failure(request.url, exc)
    else:
        try:
            if not allow_incomplete:
                await check_opening_async(ledger, str(request.url))
                notices.never_proves(describe(ledger))
            waive_check(ledger)
            return ledger
        except BaseException as exc:
            with contextlib.suppress(Exception):
                await aclose_ledger(ledger)
            failure = _opening_failure(request.url, exc) if isinstance(exc, Exception) else exc
    raise failure


def setup_ledger(url: str, **options: Any) -> LedgerInfo:
    """Create a store's tables or keys (idempotent) and describe it: the backend's own
    ``setup(request)`` (e.g. DDL under a privileged role), else opening it."""
    backend, request = _prepare(url, options)
    try:
        return _setup(backend, request)
    except Exception as exc:
        failure = _opening_failure(request.url, exc)
    raise failure


def _setup(backend: Backend, request: OpenRequest) -> LedgerInfo:
    own = getattr(backend, "setup", None)
    if callable(own):
        info = own(request)
        if not isinstance(info, LedgerInfo):
            raise LedgerError(
                f"{type(backend).__name__}.setup returned {type(info).__name__}, not LedgerInfo"
            )
        return info
    return set_up_by_opening(backend, request)


def set_up_by_opening(backend: Backend, request: OpenRequest) -> LedgerInfo:
    """Set a store up by opening a ledger on it with ``create=True`` (its open creates
    what is missing), and describe it: the ``setup`` of a backend that has no other. A
    URL's ``create=false`` is for its opens: the fix its refusal prints is ``setup`` on
    that same URL."""
    ledger = backend.open(request.with_options(create=True))
    try:
        return describe(ledger)
    finally:
        close_ledger(ledger)


__all__ = [
    "ENTRY_POINT_GROUP",
    "Backend",
    "InvalidLedgerURL",
    "OpenRequest",
    "available_schemes",
    "backend_for",
    "open_async_ledger",
    "open_ledger",
    "register_backend",
    "set_up_by_opening",
    "setup_ledger",
    "testing_hook",
]
