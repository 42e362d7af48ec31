"""The one scratch prefix ``decision-ledger check`` writes under, and the guard every
backend's ``remove_scratch(url, prefix)`` hook enforces before it touches anything.

A ledger never deletes records (C2): removing a check's namespaces is an administrative
hook of the backend, and only ever for a prefix this module accepts. The prefix is plain
ASCII (``ledger-conformance-`` + 6 to 32 lowercase letters or digits + ``-``), so every
store can match it literally: no LIKE wildcard, regex metacharacter or glob byte in it,
and its byte range is its code point range.
"""

from __future__ import annotations

import re

from .errors import ScratchRefused

SCRATCH_PREFIX = "ledger-conformance"
_SCRATCH = re.compile(r"ledger-conformance-[0-9a-z]{6,32}-")


def is_scratch_prefix(prefix: object) -> bool:
    """Only a check's own prefix (``ledger-conformance-<token>-``) may be removed."""
    return isinstance(prefix, str) and _SCRATCH.fullmatch(prefix) is not None


def require_scratch_prefix(prefix: object) -> str:
    """``prefix`` when it is a check's own scratch prefix; :class:`ScratchRefused` else,
    before any I/O."""
    if not is_scratch_prefix(prefix):
        raise ScratchRefused(
            f"remove_scratch refuses {prefix!r:.80}: only a check's own scratch prefix "
            f"({SCRATCH_PREFIX}-<token>-) may be removed, and a ledger never deletes (C2)"
        )
    assert isinstance(prefix, str)
    return prefix


def prefix_bounds(prefix: str) -> tuple[str, str]:
    """``[low, high)``: exactly the names that start with the (checked) scratch prefix,
    in byte order (SQLite's BINARY collation, PostgreSQL ``bytea``, BSON strings): a
    range on an index, literal by construction (no pattern language involved)."""
    checked = require_scratch_prefix(prefix)
    return checked, checked[:-1] + chr(ord(checked[-1]) + 1)


__all__ = [
    "SCRATCH_PREFIX",
    "is_scratch_prefix",
    "prefix_bounds",
    "require_scratch_prefix",
]
