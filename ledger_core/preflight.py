"""``decision-ledger doctor`` on a store that does not exist yet: what ``setup`` would
create, and the server's settings checked anyway, so a fresh server is vetted before
anything is written to it. A backend offers ``preflight(request) -> list[Check]``
(optional); nothing is created, whatever it offers."""

from __future__ import annotations

from typing import Any

from .doctor import FAIL, INFO, Check
from .errors import LedgerError
from .opening import OpenRequest
from .registry import backend_for
from .urls import scrub, secret_fragments


def before_setup(url: str, missing: tuple[str, str], **options: Any) -> list[Check]:
    """The doctor's lines for a missing store (``missing``: what, and how to create it,
    from :func:`~ledger_core.errors.missing_of`): the store, failed, then the backend's
    own checks of the server."""
    what, how = missing
    store = Check("store", FAIL, f"{what} does not exist yet", how)
    request = OpenRequest.build(url, **options)
    backend = backend_for(request.url.scheme)
    hook = getattr(backend, "preflight", None)
    if not callable(hook):
        told = f"{type(backend).__name__} checks its server only once the store exists"
        return [store, Check("configuration", INFO, told)]
    try:
        checks = list(hook(request))
    except LedgerError as exc:
        said = scrub(f"{type(exc).__name__}: {exc}", secret_fragments(url))
        failed = f"the server's settings could not be read: {said}"
        return [store, Check("configuration", FAIL, failed, raised=True)]
    return [store, *checks]
