"""Attempt tokens (C5): every spend writes a fresh one, so a retry can tell its own write."""

from __future__ import annotations

import os

TOKEN_BYTES = 16


def new_token() -> bytes:
    """128 random bits: two attempts never share a token."""
    return os.urandom(TOKEN_BYTES)


def attempt_outcome(stored: bytes | None, ours: bytes) -> bool | None:
    """After an unknown outcome: ``True`` ours landed, ``False`` another's, ``None`` none did."""
    if stored is None:
        return None
    return stored == ours
