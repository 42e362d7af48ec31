"""Ledger URLs: parse once, redact always.

A :class:`LedgerURL` keeps the raw text (with any password) only for the driver; its
``str`` and ``repr`` and every error built from it show the redacted form.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import SplitResult, parse_qsl, unquote_plus, urlencode, urlsplit, urlunsplit

from .errors import InvalidLedgerURL

_SECRET_QUERY_KEYS = frozenset({"password", "passwd", "pwd", "sslpassword", "secret", "token"})
_REDACTED = "***"


def _split(url: str) -> SplitResult:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - validates the port; raises ValueError if malformed
    except ValueError as exc:
        raise InvalidLedgerURL(f"malformed ledger URL {redact_url(url)!r}: {exc}") from None
    return parts


def redact_url(url: str) -> str:
    """``url`` with its password (and secret-looking query values) replaced by ``***``."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable URL>"
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostinfo = netloc.rpartition("@")
        user, sep, _password = userinfo.partition(":")
        netloc = f"{user}{':' + _REDACTED if sep else ''}@{hostinfo}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode(
            [(k, _REDACTED if k.lower() in _SECRET_QUERY_KEYS else v) for k, v in pairs],
            safe="*",
        )
    # Joined by hand: urlunsplit folds an empty host's "sqlite:////abs.db" into "sqlite://abs.db".
    slashes = "//" if url[len(parts.scheme) + 1 :].startswith("//") else ""
    text = f"{parts.scheme}:{slashes}{netloc}{parts.path}"
    return text + (f"?{query}" if query else "") + (f"#{parts.fragment}" if parts.fragment else "")


@dataclass(frozen=True)
class LedgerURL:
    """A parsed ledger URL. ``raw`` holds secrets: pass it to drivers only."""

    raw: str = field(repr=False)
    parts: SplitResult = field(repr=False)
    scheme: str
    redacted: str
    query: Mapping[str, str] = field(repr=False)

    @classmethod
    def parse(cls, url: str) -> LedgerURL:
        if not isinstance(url, str) or not url:
            raise InvalidLedgerURL("a ledger URL must be a non-empty str")
        parts = _split(url)
        if not parts.scheme:
            raise InvalidLedgerURL(
                f"ledger URL {redact_url(url)!r} has no scheme (expected e.g. sqlite:///ledger.db)"
            )
        query: dict[str, str] = {}
        for key, value in parse_qsl(parts.query, keep_blank_values=True):
            if key in query:
                raise InvalidLedgerURL(f"option {key!r} given twice in {redact_url(url)!r}")
            query[key] = value
        return cls(
            raw=url,
            parts=parts,
            scheme=parts.scheme.lower(),
            redacted=redact_url(url),
            query=query,
        )

    def without_query(self, *keys: str) -> str:
        """The raw URL minus the named query options (ours, not the driver's).

        The kept parameters stay byte for byte as written: re-encoding them would turn a
        space into ``+``, which drivers such as libpq read as a literal plus.
        """
        segments = [s for s in self.parts.query.split("&") if s]
        kept = "&".join(s for s in segments if unquote_plus(s.partition("=")[0]) not in keys)
        p = self.parts
        return urlunsplit((p.scheme, p.netloc, p.path, kept, p.fragment))

    def __str__(self) -> str:
        return self.redacted

    def __repr__(self) -> str:
        return f"LedgerURL({self.redacted!r})"


def check_options(url: LedgerURL, options: Mapping[str, Any], known: Collection[str]) -> None:
    """Refuse options a backend does not know, naming the ones it does."""
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise InvalidLedgerURL(
            f"unknown option(s) {', '.join(map(repr, unknown))} for {url.scheme}:// "
            f"(known: {', '.join(sorted(known))})"
        )


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def option_bool(options: Mapping[str, Any], name: str, default: bool) -> bool:
    """A boolean option given as a bool or as URL text (``true``/``false``/``1``/``0``)."""
    value = options.get(name, default)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in _TRUE | _FALSE:
        return value.lower() in _TRUE
    raise InvalidLedgerURL(f"option {name!r} must be true or false, not {value!r}")


def option_float(options: Mapping[str, Any], name: str, default: float) -> float:
    """A non-negative number option given as a number or as URL text."""
    value = options.get(name, default)
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InvalidLedgerURL(f"option {name!r} must be a number, not {value!r}") from None
    if number < 0 or number != number:
        raise InvalidLedgerURL(f"option {name!r} must be a non-negative number")
    return number
