"""Request ids (C8) and the one collision-free key encoding (C7).

Every backend validates through :func:`validate_request_id` before any I/O and keys
its records with :func:`ledger_key` (or stores namespace and id in separate columns),
so no backend invents its own escaping.
"""

from __future__ import annotations

import hashlib

from .errors import InvalidLedgerURL, InvalidRequestId

MAX_ID_BYTES = 1024
MAX_NAMESPACE_BYTES = 256
DEFAULT_NAMESPACE = "default"
CLOSED_PROVEN_PREFIX = "closed-proven:"
CLOSED_PROVEN_HASHED_PREFIX = "closed-proven-sha256:"


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


def closed_proven_id(request_id: str) -> str:
    """The id a host spends to record that it closed ``request_id`` with a proof (H3).

    ``"closed-proven:" + id``; an id too long to carry the prefix within the 1024-byte
    limit is named by its SHA-256 instead, so every valid id can be closed.
    """
    marker = CLOSED_PROVEN_PREFIX + request_id
    if len(marker.encode("utf-8")) <= MAX_ID_BYTES:
        return marker
    digest = hashlib.sha256(validate_request_id(request_id)).hexdigest()
    return CLOSED_PROVEN_HASHED_PREFIX + digest
