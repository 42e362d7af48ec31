"""What every ledger shipped here has in common, so each backend writes only its I/O.

A backend computes a :class:`LedgerInfo` once at open and implements ``_spend`` /
``_is_spent`` on validated id bytes (validation is here, before any I/O: C8). Markers
(``spend_marker``) go through the same two methods: id bytes starting with ``0xFF``,
which no request id can be. An exception out of them that is not a ``LedgerError`` (a
driver error a backend forgot to map, a bug) is raised as :class:`AmbiguousSpend` or
:class:`LedgerUnavailable`, chained, so "every error out of a ledger is a
``LedgerError``" never rests on every backend's every path (a ``try`` costs nothing in
CPython 3.11+ until something raises). On the hot path (``spend``, ``is_spent``) the
guard is written inline: a warm call runs the public method, ``validate_request_id`` and
the backend's method, nothing else of the base.

However a ledger is made (``open_ledger``, ``from_client``, a constructor), before its
first answer it checks that no migration into its namespace is unfinished
(``IncompleteMigration``), in every answering method (``spend_many`` too);
``runs.allow_incomplete`` lets the migration's target and the reporting tools through.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

from .errors import AmbiguousSpend, LedgerError, LedgerUnavailable
from .ids import validate_marker, validate_request_id
from .protocol import LedgerInfo
from .reentry import attempt_digest
from .runs import check_opening, check_opening_async

# The methods that answer about ids: each passes the migration check before its first answer.
_ANSWERS = ("spend", "is_spent", "spend_as", "spend_many", "is_spent_many")


class _Described:
    _info: LedgerInfo
    _cleared = False  # the migration check passed (or was waived) for this ledger

    @property
    def store_id(self) -> str | None:
        """The store's identity (C6), or ``None`` when this ledger must never prove."""
        return self._info.store_id

    def describe(self) -> LedgerInfo:
        return self._info

    def __repr__(self) -> str:
        info: LedgerInfo | None = getattr(self, "_info", None)
        if info is None:  # still opening
            return f"<{type(self).__name__} (opening)>"
        return (
            f"<{type(self).__name__} {info.location or info.backend} "
            f"namespace={info.namespace!r} store_id={info.store_id!r}>"
        )


def _unmapped_spend(ledger: object, exc: Exception) -> AmbiguousSpend:
    # The exception's text is not repeated: a backend that did not map it did not
    # scrub it either. It stays chained for whoever debugs the backend.
    return AmbiguousSpend(
        f"{type(ledger).__name__}: spend raised {type(exc).__name__}, not a LedgerError; "
        "the write may have landed (treat as spent)"
    )


def _unmapped_read(ledger: object, exc: Exception) -> LedgerUnavailable:
    return LedgerUnavailable(
        f"{type(ledger).__name__}: is_spent raised {type(exc).__name__}, not a LedgerError; "
        "nothing was read"
    )


def _gated(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def answer(self: LedgerBase, *args: Any, **kwargs: Any) -> Any:
        if not self._cleared:
            self._clear()
        return method(self, *args, **kwargs)

    answer.__gated__ = True  # type: ignore[attr-defined]
    return answer


def _gated_async(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    async def answer(self: AsyncLedgerBase, *args: Any, **kwargs: Any) -> Any:
        if not self._cleared:
            await self._clear()
        return await method(self, *args, **kwargs)

    answer.__gated__ = True  # type: ignore[attr-defined]
    return answer


_F = TypeVar("_F", bound=Callable[..., Any])


def _validated_first(method: _F) -> _F:
    """A method that validates, then passes the gate itself (C8: no I/O before that)."""
    method.__gated__ = True  # type: ignore[attr-defined]
    return method


def _gate(cls: type, wrap: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
    for name in _ANSWERS:
        method = cls.__dict__.get(name)
        if callable(method) and not getattr(method, "__gated__", False):
            setattr(cls, name, wrap(method))


class LedgerBase(_Described):
    """A sync ledger: validate, then hand the id bytes to the backend."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _gate(cls, _gated)

    def _clear(self) -> None:
        check_opening(self, repr(self))  # repr: redacted, and total while still opening
        self._cleared = True

    def spend(self, request_id: str) -> bool:
        """Record ``request_id``; ``True`` only if THIS call recorded it."""
        raw = validate_request_id(request_id)
        if not self._cleared:
            self._clear()
        try:
            return self._spend(raw)
        except LedgerError:
            raise
        except Exception as exc:
            raise _unmapped_spend(self, exc) from exc

    def is_spent(self, request_id: str) -> bool:
        """Whether ``request_id`` is recorded; never records, raises on failure."""
        raw = validate_request_id(request_id)
        if not self._cleared:
            self._clear()
        try:
            return self._is_spent(raw)
        except LedgerError:
            raise
        except Exception as exc:
            raise _unmapped_read(self, exc) from exc

    def spend_marker(self, marker: bytes) -> bool:
        """Spend a marker (see :func:`ledger_core.ids.marker_id`): stored like an id,
        beside the ids, where no request id can reach it."""
        return self._guarded_spend(validate_marker(marker))

    def is_marker_spent(self, marker: bytes) -> bool:
        try:
            return self._is_spent(validate_marker(marker))
        except LedgerError:
            raise
        except Exception as exc:
            raise _unmapped_read(self, exc) from exc

    def _guarded_spend(self, raw: bytes, digest: bytes | None = None) -> bool:
        try:
            return self._spend(raw) if digest is None else self._spend_as(raw, digest)
        except LedgerError:
            raise
        except Exception as exc:
            raise _unmapped_spend(self, exc) from exc

    def _spend(self, request_id: bytes) -> bool:
        raise NotImplementedError

    def _is_spent(self, request_id: bytes) -> bool:
        raise NotImplementedError

    def _spend_as(self, request_id: bytes, digest: bytes) -> bool:
        raise NotImplementedError  # ReentrantLedgerBase

    def close(self) -> None:
        """Release connections this ledger opened (never ones it was given)."""

    def __enter__(self) -> LedgerBase:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AsyncLedgerBase(_Described):
    """An async ledger: validate, then await the backend."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _gate(cls, _gated_async)

    async def _clear(self) -> None:
        await check_opening_async(self, repr(self))
        self._cleared = True

    async def spend(self, request_id: str) -> bool:
        """Record ``request_id``; ``True`` only if THIS call recorded it."""
        raw = validate_request_id(request_id)
        if not self._cleared:
            await self._clear()
        try:
            return await self._spend(raw)
        except LedgerError:
            raise
        except Exception as exc:
            raise _unmapped_spend(self, exc) from exc

    async def is_spent(self, request_id: str) -> bool:
        """Whether ``request_id`` is recorded; never records, raises on failure."""
        raw = validate_request_id(request_id)
        if not self._cleared:
            await self._clear()
        try:
            return await self._is_spent(raw)
        except LedgerError:
            raise
        except Exception as exc:
            raise _unmapped_read(self, exc) from exc

    async def spend_marker(self, marker: bytes) -> bool:
        """Spend a marker, where no request id can reach it (see ``LedgerBase``)."""
        return await self._guarded_spend(validate_marker(marker))

    async def is_marker_spent(self, marker: bytes) -> bool:
        try:
            return await self._is_spent(validate_marker(marker))
        except LedgerError:
            raise
        except Exception as exc:
            raise _unmapped_read(self, exc) from exc

    async def _guarded_spend(self, raw: bytes, digest: bytes | None = None) -> bool:
        try:
            return await (self._spend(raw) if digest is None else self._spend_as(raw, digest))
        except LedgerError:
            raise
        except Exception as exc:
            raise _unmapped_spend(self, exc) from exc

    async def _spend(self, request_id: bytes) -> bool:
        raise NotImplementedError

    async def _is_spent(self, request_id: bytes) -> bool:
        raise NotImplementedError

    async def _spend_as(self, request_id: bytes, digest: bytes) -> bool:
        raise NotImplementedError  # AsyncReentrantLedgerBase

    async def aclose(self) -> None:
        """Release connections this ledger opened (never ones it was given)."""

    async def __aenter__(self) -> AsyncLedgerBase:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class ReentrantLedgerBase(LedgerBase):
    """A sync ledger with C10 re-entry: the backend's ``_spend_as`` records the id and
    the key's digest in one write (one round trip), beside the C5 attempt token."""

    @_validated_first
    def spend_as(self, request_id: str, attempt_key: str) -> bool:
        """Record ``request_id`` under ``attempt_key``: ``True`` if this call recorded it
        or the same key did earlier; ``False`` to any other key or a plain spend."""
        raw, digest = validate_request_id(request_id), attempt_digest(attempt_key)
        if not self._cleared:
            self._clear()
        return self._guarded_spend(raw, digest)


class AsyncReentrantLedgerBase(AsyncLedgerBase):
    """An async ledger with C10 re-entry (see :class:`ReentrantLedgerBase`)."""

    @_validated_first
    async def spend_as(self, request_id: str, attempt_key: str) -> bool:
        raw, digest = validate_request_id(request_id), attempt_digest(attempt_key)
        if not self._cleared:
            await self._clear()
        return await self._guarded_spend(raw, digest)
