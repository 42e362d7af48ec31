"""Request ids (C8), attempt keys (C10) and the one collision-free key encoding (C7).

Every backend validates through :func:`validate_request_id` before any I/O and keys
its records with :func:`ledger_key` (or stores namespace and id in separate columns),
so no backend invents its own escaping.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

from .errors import InvalidLedgerURL, InvalidRequestId

MAX_ID_BYTES = 1024
MAX_NAMESPACE_BYTES = 256
DEFAULT_NAMESPACE = "default"
# Markers (what a host or a migration records beside the ids) start with a byte that
# never occurs in UTF-8, so no request id can name one (and forge "closed-proven:x").
MARKER_LEAD = b"\xff"
MIN_KEY_CHARS = 16  # an attempt key (C10): ``ledger_core.reentry``
MAX_KEY_CHARS = 256


class MarkerKind:
    """The kinds of marker the core records; a backend stores them as opaque id bytes."""

    CLOSED_PROVEN = "closed-proven"  # H3/H4: the host closed the request with a proof
    LINEAGE = "migrated-from"  # migration: this store continues another one
    # Migration runs into a store are numbered 1, 2, ...: run n is incomplete while
    # "started" n is spent and "done" n is not (markers are never unspent).
    MIGRATION_STARTED = "migration-started"  # subject: the run number
    MIGRATION_SOURCE = "migration-source"  # subject: run number NUL source store_id
    MIGRATION_DONE = "migration-done"  # subject: the run number
    # A run into a store that already continues its source (a catch-up after the hosts
    # switched): the store is in service, so opening it is not refused meanwhile.
    MIGRATION_CATCH_UP = "migration-catch-up"  # subject: the run number
    # Who started run n, and when, for ``lineage`` and refusals: markers hold no value,
    # so the note's bytes are spelled as one marker per set bit (subject: n NUL bit),
    # closed by n NUL "end" once every bit is written.
    MIGRATION_NOTE = "migration-note"


def validate_attempt_key(attempt_key: object) -> bytes:
    """Check an attempt key before any I/O: printable ASCII, 16 to 256 characters."""
    if not isinstance(attempt_key, str):
        raise InvalidRequestId(f"attempt key must be str, not {type(attempt_key).__name__}")
    if not (MIN_KEY_CHARS <= len(attempt_key) <= MAX_KEY_CHARS) or not (
        attempt_key.isascii() and attempt_key.isprintable()
    ):
        raise InvalidRequestId(
            f"attempt key must be {MIN_KEY_CHARS} to {MAX_KEY_CHARS} printable ASCII characters"
        )
    return attempt_key.encode("ascii")


def validate_request_id(request_id: object) -> bytes:
    """Return the id's exact UTF-8 bytes, or raise :class:`InvalidRequestId`.

    Ids compare exactly: no case folding, trimming or Unicode normalization, so two
    strings that differ in any code point are two decisions.
    """
    if not isinstance(request_id, str):
        raise InvalidRequestId(f"request id must be str, not {type(request_id).__name__}")
    try:
        raw = request_id.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidRequestId("request id is not valid Unicode (lone surrogate)") from None
    if not raw:
        raise InvalidRequestId("request id is empty")
    if len(raw) > MAX_ID_BYTES:
        raise InvalidRequestId(f"request id is {len(raw)} UTF-8 bytes; the limit is {MAX_ID_BYTES}")
    return raw


def validate_namespace(namespace: object) -> str:
    """Check a namespace: a non-empty str of at most 256 UTF-8 bytes, no surrogates."""
    if not isinstance(namespace, str):
        raise InvalidLedgerURL(f"namespace must be str, not {type(namespace).__name__}")
    try:
        raw = namespace.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidLedgerURL("namespace is not valid Unicode (lone surrogate)") from None
    if not raw or len(raw) > MAX_NAMESPACE_BYTES:
        raise InvalidLedgerURL(f"namespace must be 1 to {MAX_NAMESPACE_BYTES} UTF-8 bytes")
    return namespace


def ledger_key(namespace: str, request_id: bytes) -> bytes:
    """Encode (namespace, id) so that no two pairs share a key.

    The namespace is length-prefixed, so its end is known without scanning for a
    separator: ``("a", "b:c")`` -> ``b"1:a:b:c"`` and ``("a:b", "c")`` -> ``b"3:a:b:c"``.
    """
    ns = namespace.encode("utf-8")
    return b"%d:%s:%s" % (len(ns), ns, request_id)


def marker_id(kind: str, subject: str) -> bytes:
    """The id bytes of marker ``kind`` about ``subject``: ``0xFF`` (never in UTF-8, so
    never a request id) + kind + ``0x00`` + the subject's UTF-8. A backend stores them
    like ids (at most :data:`MAX_MARKER_BYTES`) and leaves them out of ``spent_ids``."""
    if not kind or "\x00" in kind:
        raise ValueError(f"marker kind {kind!r} must be non-empty and hold no NUL")
    return MARKER_LEAD + kind.encode("ascii") + b"\x00" + subject.encode("utf-8")


# The longest marker the core writes: the longest kind plus a 1024-byte subject.
MAX_MARKER_BYTES = MAX_ID_BYTES + 32


def validate_marker(marker: object) -> bytes:
    """Check marker bytes given to ``spend_marker``/``is_marker_spent`` (before any I/O)."""
    if not isinstance(marker, bytes) or not is_marker(marker):
        raise InvalidRequestId("a marker is bytes starting with 0xFF (see marker_id)")
    if len(marker) > MAX_MARKER_BYTES:
        raise InvalidRequestId(f"marker is {len(marker)} bytes; the limit is {MAX_MARKER_BYTES}")
    return marker


def is_marker(raw: bytes) -> bool:
    """Whether stored id bytes are a marker rather than a request id."""
    return raw[:1] == MARKER_LEAD


def closed_proven_marker(request_id: str) -> bytes:
    """The marker a host spends to record that it closed ``request_id`` with a proof (H3)."""
    validate_request_id(request_id)
    return marker_id(MarkerKind.CLOSED_PROVEN, request_id)


def marker_range(kind: str) -> tuple[bytes, bytes]:
    """``[low, high)``: the byte range holding every marker of ``kind`` (for a backend
    that lists one kind of marker, e.g. the lineage)."""
    low = marker_id(kind, "")
    return low, low[:-1] + b"\x01"


def marker_subject(kind: str, raw: bytes) -> str:
    """The subject of a stored marker of ``kind`` (what :func:`marker_id` was given)."""
    low, _ = marker_range(kind)
    if not raw.startswith(low):
        raise ValueError(f"not a {kind} marker")
    return raw[len(low) :].decode("utf-8")


def id_batches(request_ids: Sequence[str], size: int) -> list[list[bytes]]:
    """A batch call's ids, every one validated before any is sent (C8), ``size`` at a time."""
    raws = [validate_request_id(request_id) for request_id in request_ids]
    return [raws[i : i + size] for i in range(0, len(raws), size)]


def first_wins(ids: Iterable[bytes], won: Collection[bytes]) -> list[bool]:
    """Each id's answer in a batch of spends: whether it is among ``won``, and a repeat's
    ``False``, as a second spend of it would answer."""
    left = set(won)
    answers = []
    for raw in ids:
        answers.append(raw in left)
        left.discard(raw)
    return answers
