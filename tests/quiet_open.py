"""Opening a shipped ledger warns of nothing, sync or async: a warning on every open (as
redis-py's "a synchronous Retry was passed to an asyncio client" was) is noise a user
learns to ignore, and hides the one that matters."""

from __future__ import annotations

import gc
import warnings
from typing import Any

from tests.flavors import Flavored


def warnings_on_open(url: str, **options: Any) -> dict[str, list[str]]:
    """Each flavor's warnings while it opens and answers a first spend (the first
    command connects: a warning raised there belongs to the open too)."""
    found: dict[str, list[str]] = {}
    for flavor in ("sync", "async"):
        gc.collect()  # nothing of an earlier test is collected inside the window
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ledger = Flavored(flavor, url, **options)
            try:
                ledger.spend("quiet-open")
            finally:
                ledger.dispose()
        found[flavor] = [f"{w.category.__name__}: {w.message}" for w in caught]
    return found


NONE: dict[str, list[str]] = {"sync": [], "async": []}
