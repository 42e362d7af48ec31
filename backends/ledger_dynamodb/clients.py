"""boto3 and aiobotocore clients: built for a URL's :class:`Target`, described for a
host's own, rebuilt like a host's in a forked child. Drivers are imported only here."""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ledger_core.errors import MissingDriver
from ledger_core.opening import OpenRequest

from .deadlines import install
from .errors import unavailable
from .options import LEDGER_OPTIONS, Target, parse

ClientFactory = Callable[[], Any]
AsyncClientFactory = Callable[[], Awaitable[Any]]

CLIENT_OPTIONS = LEDGER_OPTIONS - {"timeout"}  # a host's client keeps its own timeouts


def _driver(module: str, ledger: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        name = module.partition(".")[0]
        raise MissingDriver(
            f"the {ledger} ledger needs {name}: pip install 'decision-ledger[dynamodb]'"
        ) from exc


def sync_factory(target: Target) -> ClientFactory:
    boto3 = _driver("boto3", "DynamoDB")

    def make() -> Any:
        try:
            session = boto3.session.Session(profile_name=target.profile)
            return install(session.client("dynamodb", **target.client_kwargs()))
        except Exception as exc:
            raise unavailable(exc, "client setup", target.location) from exc

    return make


def async_factory(target: Target) -> AsyncClientFactory:
    module = _driver("aiobotocore.session", "async DynamoDB")

    async def make() -> Any:
        try:
            session = module.AioSession(profile=target.profile)
            return await session.create_client("dynamodb", **target.client_kwargs()).__aenter__()
        except Exception as exc:
            raise unavailable(exc, "client setup", target.location) from exc

    return make


def client_target(client: Any, table: str, options: Mapping[str, Any]) -> Target:
    """A :class:`Target` describing a host's client (its region and endpoint)."""
    request = OpenRequest.build(f"dynamodb://{table}", **options)
    request.check(CLIENT_OPTIONS)
    meta = getattr(client, "meta", None)
    if meta is not None and getattr(meta, "client", None) is not None:
        # A resource's client serializes Python values itself (boto3 injects handlers):
        # our low-level attribute values would be wrapped again and miss the key schema.
        raise TypeError("pass a DynamoDB client (boto3.client('dynamodb')), not a resource")
    if meta is None or getattr(meta, "service_model", None) is None:
        raise TypeError(
            f"expected a boto3/aiobotocore DynamoDB client, not {type(client).__name__}"
        )
    endpoint = getattr(meta, "endpoint_url", None)
    where = {"region": meta.region_name, "endpoint_url": str(endpoint) if endpoint else None}
    return parse(request.with_options(**{k: v for k, v in where.items() if v}))


def _like(client: Any) -> dict[str, Any]:
    meta = client.meta
    return {
        "region_name": meta.region_name,
        "endpoint_url": meta.endpoint_url,
        "config": meta.config,
    }


def _carry_credentials(old: Any, new: Any) -> Any:
    # botocore has no public accessor of a client's credentials (they live on its
    # request signer): without this a child signs with the environment's, or none
    # (test_a_child_of_a_host_client_signs_with_its_credentials).
    creds = getattr(getattr(old, "_request_signer", None), "_credentials", None)
    signer = getattr(new, "_request_signer", None)
    if creds is not None and signer is not None:
        signer._credentials = creds
    return new


def host_sync_factory(client: Any) -> ClientFactory:
    """The host's boto3 ``client`` once, then (a forked child) a new one like it."""
    first = [client]

    def make() -> Any:
        if first:
            return first.pop()
        new = _driver("boto3", "DynamoDB").session.Session().client("dynamodb", **_like(client))
        return _carry_credentials(client, new)

    return make


def host_async_factory(client: Any) -> AsyncClientFactory:
    """:func:`host_sync_factory` for an (entered) aiobotocore client."""
    first = [client]

    async def make() -> Any:
        if first:
            return first.pop()
        session = _driver("aiobotocore.session", "async DynamoDB").AioSession()
        new = await session.create_client("dynamodb", **_like(client)).__aenter__()
        return _carry_credentials(client, new)

    return make
