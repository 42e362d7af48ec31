"""Ledger URLs: parse once, redact always.

A :class:`LedgerURL` keeps the raw text (with any password) only for the driver; its
``str`` and ``repr`` and every error built from it show the redacted form.

Parsers disagree about where a password ends (Python splits the userinfo at the last
``@`` of the authority, libpq and PyMongo at the first ``@`` before a ``/``; a ``/``,
``?`` or ``#`` in a password makes ``urlsplit`` put part of it in the path, query or
fragment, and a driver then echoes a piece of it as a host). So a URL whose userinfo
parsers could read differently is refused before any I/O ("percent-encode the
password"): every driver then sees the same, whole password. Redaction works on the text
as typed: everything between the first ``:`` after ``scheme://`` and the LAST ``@`` of
the whole text is the password, and everything after a secret-looking ``key=`` up to the
next ``&`` is its value. When in doubt, more is redacted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from urllib.parse import SplitResult, parse_qsl, unquote, unquote_plus, urlsplit, urlunsplit

from .errors import InvalidLedgerURL, LedgerError

_REDACTED = "***"
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
# Any key ending in one of these, followed by "=": password, sslpassword, auth_token, apikey...
_SECRET_KEY = re.compile(r"(?i)(?:password|passwd|pwd|secret|token|key)\s*=")
# A secret shorter than this is not scrubbed from a driver's free text (it would mangle it).
MIN_FRAGMENT = 3
_BAD_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
_ENCODE = (
    "percent-encode the password (and the user): '@' as %40, '/' as %2F, '?' as %3F, "
    "'#' as %23, '%' as %25"
)


def ambiguous_userinfo(url: str) -> bool:
    """Whether parsers could disagree about this URL's user and password: two ``@`` in
    the authority, an ``@`` that libpq/PyMongo read as the end of a userinfo that
    ``urlsplit`` ends earlier (at ``?`` or ``#``), an ``@`` after the authority anywhere
    but inside a query value (``?application_name=a@b``), or a ``%`` in the userinfo that
    is not an escape. A URL without ``scheme://host`` has no userinfo."""
    scheme = _SCHEME.match(url)
    if scheme is None or not url.startswith("//", scheme.end()):
        return False
    rest = url[scheme.end() + 2 :]
    end = _first(rest, "/?#")
    if end == 0:
        return False  # no authority (sqlite:////a@b.db): an "@" is in a path
    authority, tail = rest[:end], rest[end:]
    python = authority[: authority.rfind("@")] if "@" in authority else None
    cut = _first(rest, "@/")
    libpq = rest[:cut] if rest[cut : cut + 1] == "@" else None
    if python != libpq or (python is not None and _BAD_PERCENT.search(python)):
        return True
    query, fragment = tail.find("?"), _first(tail, "#")
    for at in (i for i, c in enumerate(tail) if c == "@"):
        segment = tail[max(query, tail.rfind("&", 0, at)) + 1 : at]
        if not (0 <= query < at < fragment and "=" in segment):
            return True
    return False


def _first(text: str, chars: str) -> int:
    """The index of the first of ``chars`` in ``text``, or its length."""
    return min((i for i in map(text.find, chars) if i >= 0), default=len(text))


def _secret_spans(url: str) -> list[tuple[int, int]]:
    """The (start, end) ranges of ``url`` that may hold a secret, in order."""
    spans: list[tuple[int, int]] = []
    scheme = _SCHEME.match(url)
    pos = scheme.end() if scheme else 0
    authority = scheme is not None and url.startswith("//", pos)
    if authority:
        pos += 2
    rest = pos
    at = url.rfind("@")
    if at >= pos:
        colon = url.find(":", pos, at)
        if authority and colon >= 0:
            spans.append((colon + 1, at))  # user:PASSWORD@, the password to the last "@"
        elif not authority:
            spans.append((pos, at))  # not scheme://: no telling user from password
        rest = at + 1
    tail = url[rest:]
    keys = list(_SECRET_KEY.finditer(tail))
    end = 0
    for key in keys:
        if key.start() < end:
            continue  # inside the value before it ("password=token=x")
        # To the next "&": every parser ends a query value there (a '#' or ';' not).
        end = tail.find("&", key.end())
        end = len(tail) if end < 0 else end
        spans.append((rest + key.end(), rest + end))
    if not keys and ("%" in tail or "+" in tail):
        try:
            decoded = unquote_plus(tail)
        except (UnicodeError, ValueError):  # pragma: no cover - unquote replaces bad bytes
            decoded = _REDACTED + "="
        if _SECRET_KEY.search(decoded):  # an escaped key: redact the whole query
            cut = tail.find("?") if "?" in tail else tail.find("/")
            spans.append((rest + cut + 1, len(url)))
    return spans


def redact_url(url: str) -> str:
    """``url`` with its password (and secret-looking option values) replaced by ``***``:
    total (any text, a URL or not, gives an answer) and never showing a secret."""
    if not isinstance(url, str):
        return f"<{type(url).__name__}, not a URL>"
    shown: list[str] = []
    last = 0
    for start, end in _secret_spans(url):
        shown.append(url[last:start])
        shown.append(_REDACTED)
        last = end
    shown.append(url[last:])
    return "".join(shown)


def secret_fragments(*urls: str) -> list[str]:
    """The secrets of ``urls`` as a driver could quote them (as typed, percent-decoded,
    ``repr``-escaped; never cut into pieces), longest first, each at least
    :data:`MIN_FRAGMENT` long."""
    found: set[str] = set()
    for url in urls:
        if not isinstance(url, str):
            continue
        for start, end in _secret_spans(url):
            secret = url[start:end]
            for decoded in {secret, unquote(secret), unquote_plus(secret)}:
                # As messages quote them too: {x!r} escapes what is not printable.
                found.update({decoded, repr(decoded)[1:-1], ascii(decoded)[1:-1]})
    return sorted((f for f in found if len(f) >= MIN_FRAGMENT), key=len, reverse=True)


def _whole(fragment: str) -> re.Pattern[str]:
    """``fragment`` where it stands alone: not inside a longer word ("pw" in "pwd")."""
    head = r"(?<!\w)" if fragment[:1].isalnum() or fragment[:1] == "_" else ""
    tail = r"(?!\w)" if fragment[-1:].isalnum() or fragment[-1:] == "_" else ""
    return re.compile(head + re.escape(fragment) + tail)


def scrub(text: str, fragments: Iterable[str]) -> str:
    """``text`` with every secret (see :func:`secret_fragments`) that stands in it as a
    whole replaced: the parsed secret, not any substring that happens to match a piece."""
    for fragment in fragments:
        if fragment in text:
            text = _whole(fragment).sub(_REDACTED, text)
    return text


def scrub_exception(exc: BaseException, *urls: str) -> BaseException:
    """Remove the secrets of ``urls`` from ``exc`` and every exception chained to it.

    Messages (``args``, notes) are scrubbed in place; a chained exception whose text still
    shows a secret (a ``__str__`` of its own) is cut from the chain. Returns ``exc``, or a
    plain copy of its type (else a ``LedgerError``) if its own text cannot be cleaned.
    """
    fragments = secret_fragments(*urls)
    if not fragments:
        return exc
    # Both links, always: ``raise ... from None`` hides __context__ from tracebacks but
    # keeps it on the exception, where a logger or a debugger still finds it.
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        _scrub_args(current, fragments)
        for link in ("__cause__", "__context__"):
            chained = getattr(current, link)
            if chained is None:
                continue
            _scrub_args(chained, fragments)
            if _clean(chained, fragments):
                todo.append(chained)
            else:  # a __str__ of its own still shows it: cut it off
                setattr(current, link, None)
                current.__suppress_context__ = True
    if _clean(exc, fragments):
        return exc
    text = scrub(_text_of(exc), fragments)
    try:
        fresh: BaseException | None = type(exc)(text)
    except Exception:
        fresh = None
    # A type that cannot be rebuilt from its text, or whose __str__ ignores its args:
    return fresh if fresh is not None and _clean(fresh, fragments) else LedgerError(text)


def _text_of(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # pragma: no cover - a broken __str__
        return type(exc).__name__


def _clean(exc: BaseException, fragments: list[str]) -> bool:
    text = _text_of(exc) + "".join(str(n) for n in getattr(exc, "__notes__", ()))
    return scrub(text, fragments) == text


def _scrub_args(exc: BaseException, fragments: list[str]) -> None:
    try:
        exc.args = tuple(scrub(a, fragments) if isinstance(a, str) else a for a in exc.args)
        notes = getattr(exc, "__notes__", None)
        if isinstance(notes, list):
            notes[:] = [scrub(n, fragments) if isinstance(n, str) else n for n in notes]
    except Exception:  # pragma: no cover - read-only args: _clean decides
        pass


def _split(url: str) -> SplitResult:
    if ambiguous_userinfo(url):
        raise InvalidLedgerURL(
            f"ledger URL {redact_url(url)!r} is ambiguous (parsers would read its user and"
            f" password differently): {_ENCODE}"
        )
    problem = None
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - validates the port; raises ValueError if malformed
    except ValueError as exc:
        # The parser's message quotes the text it choked on, which may be a piece of a
        # password ("Xy7" of "Xy7/kQ9"): shown only for a URL without secrets, and raised
        # outside this block so that nothing is chained either.
        problem = str(exc)
    if problem is not None:
        if _secret_spans(url):
            problem = f"it does not parse; {_ENCODE}"
        raise InvalidLedgerURL(f"malformed ledger URL {redact_url(url)!r}: {problem}")
    return parts


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
            raw=url, parts=parts, scheme=parts.scheme.lower(), redacted=redact_url(url), query=query
        )

    def without_query(self, *keys: str) -> str:
        """The raw URL minus the named query options (ours, not the driver's); the rest
        byte for byte (re-encoding turns a space into ``+``, a literal plus to libpq)."""
        segments = [s for s in self.parts.query.split("&") if s]
        kept = "&".join(s for s in segments if unquote_plus(s.partition("=")[0]) not in keys)
        p = self.parts
        return urlunsplit((p.scheme, p.netloc, p.path, kept, p.fragment))

    def __str__(self) -> str:
        return self.redacted

    def __repr__(self) -> str:
        return f"LedgerURL({self.redacted!r})"
