"""``sqlite:///relative.db`` and ``sqlite:////absolute.db`` (SQLAlchemy's convention) ->
one frozen :class:`Target`. No I/O."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import unquote

from ledger_core.errors import InvalidLedgerURL, LedgerUnavailable
from ledger_core.ids import DEFAULT_NAMESPACE, validate_namespace
from ledger_core.opening import OpenRequest, durability_level
from ledger_core.protocol import Durability
from ledger_core.urls import LedgerURL

DEFAULT_BUSY_TIMEOUT = 30.0

# ``create`` (default true): whether a missing file may become a new, empty ledger.
# The CLI's reads, ``spend`` and a migration's source open with create=false.
# ``durability=process`` accepts a file on tmpfs (lost with the machine) as a proof.
OPTIONS = frozenset({"busy_timeout", "create", "durability"})


KEYWORDS = ("namespace", "busy_timeout", "create", "durability")


@dataclass(frozen=True)
class Target:
    """One ledger to open: an absolute path (fixed at open, so a later ``chdir`` never
    moves the ledger to another file), a namespace and how to treat the file."""

    path: str
    namespace: str = DEFAULT_NAMESPACE
    busy_timeout: float = DEFAULT_BUSY_TIMEOUT
    create: bool = True
    durability: str = Durability.MACHINE  # what the user accepts as a proof

    def checked(self) -> Target:
        """This target validated (no I/O); an in-memory database refused (it forgets)."""
        accepted = durability_level(self.durability, levels=True)  # names or levels
        raw = os.fspath(self.path)
        if raw in ("", ":memory:") or raw.startswith("file::memory:"):
            raise LedgerUnavailable("an in-memory SQLite database forgets: give a file path")
        return replace(
            self,
            path=os.path.abspath(raw),
            namespace=validate_namespace(self.namespace),
            durability=accepted,
        )

    def keywords(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in KEYWORDS}

    @property
    def location(self) -> str:
        return f"sqlite:///{self.path}"


def url_path(url: LedgerURL) -> str:
    after = url.raw.partition(":")[2]
    if not after.startswith("//"):
        # sqlite:/old.db once read as a relative path: the slashes are the convention's.
        name = url.parts.path.lstrip("/") or "ledger.db"
        raise InvalidLedgerURL(
            f"{url}: a SQLite URL starts with sqlite:/// (three slashes): write "
            f"sqlite:///{name} for {name} in the working directory, or sqlite:////{name} "
            f"for /{name}"
        )
    if url.parts.netloc:
        raise InvalidLedgerURL(
            f"{url}: a SQLite URL has no host; use sqlite:///relative.db or sqlite:////abs.db"
        )
    path = unquote(url.parts.path)[1:]
    if not path:
        raise InvalidLedgerURL(f"{url}: no file path (e.g. sqlite:///ledger.db)")
    return path


def target(request: OpenRequest) -> Target:
    request.check(OPTIONS)
    return Target(
        url_path(request.url),
        namespace=request.namespace,
        busy_timeout=request.seconds("busy_timeout", DEFAULT_BUSY_TIMEOUT),
        create=request.create(),
        durability=request.text("durability", "machine"),
    ).checked()
