"""Attempt tokens (C5): every spend writes a fresh one, so a retry can tell its own write.

A token is a random 64-bit prefix, drawn once per process (and again in every forked
child), followed by a 64-bit counter: unique across attempts and processes, and cheap
enough for the hot path (no system call per spend).
"""

from __future__ import annotations

import itertools
import os

TOKEN_BYTES = 16

_prefix = os.urandom(8)
_counter = itertools.count()


def _reseed() -> None:
    global _prefix, _counter
    _prefix = os.urandom(8)
    _counter = itertools.count()


os.register_at_fork(after_in_child=_reseed)


def new_token() -> bytes:
    """16 bytes no other attempt, in this process or any other, will ever write."""
    return _prefix + next(_counter).to_bytes(8, "big")


def attempt_outcome(stored: bytes | None, ours: bytes) -> bool | None:
    """After an unknown outcome: ``True`` ours landed, ``False`` another's, ``None`` none did."""
    if stored is None:
        return None
    return stored == ours
