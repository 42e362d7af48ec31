"""Opening ledgers by URL: schemes, options, errors, and passwords that never show."""

from __future__ import annotations

import asyncio
import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest

from ledger_core import (
    AsyncMemoryLedger,
    InvalidLedgerURL,
    LedgerURL,
    MemoryLedger,
    UnknownScheme,
    available_schemes,
    default_ledger,
    open_async_ledger,
    open_ledger,
    redact_url,
    register_backend,
)
from ledger_core.opening import OpenRequest

SECRET = "s3cr3t-pa55"


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://user:{SECRET}@db:5432/app",
        f"redis://:{SECRET}@cache:6379/0",
        f"postgresql://db/app?password={SECRET}&sslmode=require",
    ],
)
def test_passwords_are_redacted(url: str) -> None:
    parsed = LedgerURL.parse(url)
    for shown in (redact_url(url), str(parsed), repr(parsed)):
        assert SECRET not in shown
        assert "***" in shown or "raw" not in shown


@pytest.mark.parametrize(
    ("url", "error", "message"),
    [
        ("", InvalidLedgerURL, "non-empty"),
        ("no-scheme-here", InvalidLedgerURL, "no scheme"),
        ("nosuch://host", UnknownScheme, "nosuch"),
        (f"redis://u:{SECRET}@h:99999/0", InvalidLedgerURL, "malformed"),
        ("sqlite://host/x.db", InvalidLedgerURL, "no host"),
        ("sqlite://", InvalidLedgerURL, "no file path"),
        ("sqlite:///x.db?nope=1", InvalidLedgerURL, "unknown option"),
        ("sqlite:///x.db?busy_timeout=soon", InvalidLedgerURL, "number"),
        ("memory://?namespace=", InvalidLedgerURL, "namespace"),
        ("memory://?namespace=a&namespace=b", InvalidLedgerURL, "twice"),
    ],
)
def test_bad_urls_give_clear_errors(url: str, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message) as caught:
        open_ledger(url)
    assert SECRET not in str(caught.value)


def test_memory_url_is_the_default_ledger() -> None:
    ledger = open_ledger("memory://")
    assert isinstance(ledger, MemoryLedger)
    assert ledger.spend("shared-with-default")
    assert default_ledger().is_spent("shared-with-default")


def test_named_memory_stores_and_namespaces_are_independent() -> None:
    a = open_ledger("memory://store-a")
    b = open_ledger("memory://store-b")
    a2 = open_ledger("memory://store-a?namespace=other")
    assert a.spend("x")
    assert b.spend("x")
    assert a2.spend("x")
    assert not open_ledger("memory://store-a").spend("x")


def test_async_open(tmp_path: Path) -> None:
    async def main() -> None:
        ledger = await open_async_ledger("memory://async-store")
        assert isinstance(ledger, AsyncMemoryLedger)
        assert await ledger.spend("a") is True
        assert await ledger.spend("a") is False

    asyncio.run(main())


def test_schemes_come_from_entry_points() -> None:
    schemes = available_schemes()
    for scheme in ("memory", "sqlite", "redis", "postgresql"):
        assert scheme in schemes


def test_registered_backend_wins_and_gets_options() -> None:
    seen: dict[str, Any] = {}

    class Backend:
        def open(self, request: OpenRequest) -> MemoryLedger:
            seen.update(request.options, scheme=request.url.scheme, namespace=request.namespace)
            return MemoryLedger(namespace=request.namespace)

        async def open_async(self, request: OpenRequest) -> Any:
            raise NotImplementedError

    register_backend("thirdparty", Backend())
    open_ledger("ThirdParty://x?namespace=q&flag=1", extra=2)
    assert seen == {"namespace": "q", "flag": "1", "extra": 2, "scheme": "thirdparty"}


@pytest.mark.parametrize("url", ["sqlite:////abs/x.db", "sqlite:///rel.db", "memory://"])
def test_urls_without_secrets_show_as_written(url: str) -> None:
    assert redact_url(url) == url


def test_read_takes_options_typed_with_real_types_or_their_text() -> None:
    """A third party's options module may not defer its annotations: ``read`` took only
    the text of a type (``KeyError: <class 'float'>`` otherwise)."""
    real = dataclasses.make_dataclass(
        "Real",
        [("timeout", float, dataclasses.field(default=1.0)), ("create", bool, True)],
    )
    got: Any = OpenRequest.build("x://h?timeout=2.5&create=false").read(real)
    assert (got.timeout, got.create) == (2.5, False)
    odd = dataclasses.make_dataclass("Odd", [("limit", "float | None", None)])
    with pytest.raises(TypeError, match=re.escape("option 'limit' of Odd is a float | None")):
        OpenRequest.build("x://h").read(odd)
