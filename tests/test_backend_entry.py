"""A backend's entry point: the documented ``open(request: OpenRequest)`` (the example's
``BACKEND``), and the older ``open(url, options)`` form, which keeps working through an
adapter with a ``DeprecationWarning`` (it used to fail with a ``TypeError`` wrapped in
``LedgerUnavailable``)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from examples.acme_backend import BACKEND
from ledger_core import (
    InvalidLedgerURL,
    LedgerInfo,
    LedgerUnavailable,
    LedgerURL,
    MemoryLedger,
    open_async_ledger,
    open_ledger,
    register_backend,
    setup_ledger,
)
from ledger_core.protocol import close_ledger
from ledger_core.registry import _registered


@pytest.fixture(autouse=True)
def _unregister() -> Any:
    yield
    for scheme in ("acme", "oldform"):
        _registered.pop(scheme, None)


def test_the_examples_backend_opens_from_a_url(tmp_path: Path) -> None:
    register_backend("acme", BACKEND)
    url = f"acme:///{tmp_path}/a.db"
    with pytest.raises(LedgerUnavailable, match="create=false"):
        open_ledger(url, create=False)
    ledger: Any = open_ledger(url, namespace="prod")
    assert ledger.spend("r") is True
    assert ledger.describe().namespace == "prod"
    assert ledger.store_id.startswith("acme:")
    ledger.close()
    with pytest.raises(InvalidLedgerURL, match="unknown option"):
        open_ledger(f"{url}?tiemout=2")

    async def reopen() -> bool:
        aledger: Any = await open_async_ledger(url, namespace="prod")
        try:
            return bool(await aledger.is_spent("r"))
        finally:
            await aledger.aclose()

    assert asyncio.run(reopen()) is True


class OldForm:
    """Written to the README's older form: ``open(url, options)``."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, Any]]] = []

    def open(self, url: LedgerURL, options: Mapping[str, Any]) -> MemoryLedger:
        self.seen.append((url.scheme, dict(options)))
        return MemoryLedger()

    async def open_async(self, url: LedgerURL, options: Mapping[str, Any]) -> MemoryLedger:
        return self.open(url, options)

    def setup(self, url: LedgerURL, options: Mapping[str, Any]) -> LedgerInfo:
        return LedgerInfo(backend="oldform", store_id=None, reason="test")


def test_the_older_form_works_through_an_adapter_with_a_warning() -> None:
    old = OldForm()
    with pytest.warns(DeprecationWarning, match=r"open\(url, options\) is deprecated"):
        register_backend("oldform", old)  # type: ignore[arg-type]
    ledger = open_ledger("oldform://x?flag=1", namespace="n")
    assert ledger.spend("r") is True
    assert old.seen == [("oldform", {"flag": "1", "namespace": "n"})]
    assert setup_ledger("oldform://x").reason == "test"
    asyncio.run(open_async_ledger("oldform://x"))
    assert len(old.seen) == 2


def test_the_docs_backend_is_the_examples_backend() -> None:
    root = Path(__file__).resolve().parents[1]
    blocks = re.findall(r"```python\n(.*?)```", (root / "docs/backends.md").read_text(), re.S)
    (shown,) = [b for b in blocks if b.startswith("class AcmeBackend:")]
    example = (root / "examples/acme_backend.py").read_text()
    code = re.sub(r'\n    """.*?"""\n', "\n", example, flags=re.S)  # the docstring aside
    for line in shown.splitlines():
        assert line in code, line


def test_setup_creates_the_store_its_url_opens_with_create_false(tmp_path: Path) -> None:
    """The refusal of ``create=false`` says "run setup on this URL": that must create
    (it did not on the backends set up by opening: SQLite, Redis, third parties)."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}?create=false"
    with pytest.raises(LedgerUnavailable, match="decision-ledger setup"):
        open_ledger(url)
    assert setup_ledger(url).store_id is not None
    ledger = open_ledger(url)
    try:
        assert ledger.spend("r") is True
    finally:
        close_ledger(ledger)
