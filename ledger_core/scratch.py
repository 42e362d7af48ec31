"""The one scratch prefix ``decision-ledger check`` writes under, and the guard every
backend's ``remove_scratch(url, prefix)`` hook enforces before it touches anything (a
ledger never deletes records, C2). The prefix is plain ASCII, so every store matches it
literally (no LIKE wildcard, regex or glob byte) and its byte range is its code points.
"""

from __future__ import annotations

import re

from .errors import ScratchRefused
from .opening import OpenRequest
from .urls import LedgerURL

SCRATCH_PREFIX = "ledger-conformance"
# A thorough check leaves hundreds of thousands of records: removing them is one bulk
# delete after the run, not a spend, and a spend's few seconds cut it short (MongoDB on
# nx-27017: "timed out" after 5 s, the records left behind).
SCRATCH_TIMEOUT = 300.0
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


def scratch_request(url: LedgerURL) -> OpenRequest:
    """What a ``remove_scratch`` hook opens: ``create=false`` (a missing store is never
    created to be cleaned) and a ``timeout`` of at least :data:`SCRATCH_TIMEOUT`."""
    request = OpenRequest.build(url, create=False)
    return request.with_options(timeout=max(request.seconds("timeout", 0.0), SCRATCH_TIMEOUT))


def prefix_bounds(prefix: str) -> tuple[str, str]:
    """``[low, high)``: exactly the names that start with the (checked) scratch prefix, in
    byte order: a range on an index, with no pattern language involved."""
    checked = require_scratch_prefix(prefix)
    return checked, checked[:-1] + chr(ord(checked[-1]) + 1)


__all__ = [
    "SCRATCH_PREFIX",
    "SCRATCH_TIMEOUT",
    "is_scratch_prefix",
    "prefix_bounds",
    "require_scratch_prefix",
    "scratch_request",
]
