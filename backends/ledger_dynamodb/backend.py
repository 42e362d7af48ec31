"""The ``dynamodb://`` entry point: URL -> sync or async ledger, and ``setup``.

boto3/aiobotocore are imported only when a ledger is opened; a missing one raises
``MissingDriver`` naming ``pip install 'decision-ledger[dynamodb]'``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ledger_core.errors import LedgerError, MissingDriver
from ledger_core.opening import OpenRequest, Route
from ledger_core.protocol import LedgerInfo
from ledger_core.urls import LedgerURL

from .deadlines import install
from .errors import unavailable
from .options import LEDGER_OPTIONS, Settings, Target, client_config, parse

CLIENT_OPTIONS = LEDGER_OPTIONS - {"timeout"}  # a host's client keeps its own timeouts

EXTRA = "pip install 'decision-ledger[dynamodb]'"


def _boto3() -> Any:
    try:
        import boto3
    except ImportError as exc:
        raise MissingDriver(f"the DynamoDB ledger needs boto3: {EXTRA}") from exc
    return boto3


def _aiobotocore_session() -> Any:
    try:
        import aiobotocore.session
    except ImportError as exc:
        raise MissingDriver(f"the async DynamoDB ledger needs aiobotocore: {EXTRA}") from exc
    return aiobotocore.session


def sync_factory(target: Target) -> Any:
    """A callable that builds a new boto3 client for ``target`` (again in a forked child)."""
    boto3 = _boto3()

    def make() -> Any:
        try:
            session = boto3.session.Session(profile_name=target.profile)
            return install(session.client("dynamodb", **target.client_kwargs()))
        except Exception as exc:
            raise unavailable(exc, "client setup", target.location) from exc

    return make


def async_factory(target: Target) -> Any:
    module = _aiobotocore_session()

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
    where = {"region": meta.region_name, "endpoint_url": _explicit_endpoint(meta)}
    return parse(request.with_options(**{k: v for k, v in where.items() if v}))


def _explicit_endpoint(meta: Any) -> str | None:
    endpoint = getattr(meta, "endpoint_url", None)
    return str(endpoint) if endpoint else None


def _carry_credentials(old: Any, new: Any) -> Any:
    # botocore keeps a client's credentials on its request signer (no public accessor);
    # the child signs with the same (refreshable) credentials as the host's client.
    creds = getattr(getattr(old, "_request_signer", None), "_credentials", None)
    signer = getattr(new, "_request_signer", None)
    if creds is not None and signer is not None:
        signer._credentials = creds
    return new


def rebuild_sync(client: Any) -> Any:
    """A new boto3 client like the host's ``client``, for a forked child."""
    meta = client.meta
    new = (
        _boto3()
        .session.Session()
        .client(
            "dynamodb",
            region_name=meta.region_name,
            endpoint_url=meta.endpoint_url,
            config=meta.config,
        )
    )
    return _carry_credentials(client, new)


async def rebuild_async(client: Any) -> Any:
    meta = client.meta
    session = _aiobotocore_session().AioSession()
    new = await session.create_client(
        "dynamodb", region_name=meta.region_name, endpoint_url=meta.endpoint_url, config=meta.config
    ).__aenter__()
    return _carry_credentials(client, new)


class _DynamoDBBackend:
    """``dynamodb://TABLE?region=...&endpoint_url=...&profile=...``."""

    testing = "ledger_dynamodb.testing:HOOKS"

    def open(self, request: OpenRequest) -> Any:
        target = parse(request)
        from .ledger import DynamoDBLedger

        return DynamoDBLedger.open(target, sync_factory(target))

    async def open_async(self, request: OpenRequest) -> Any:
        target = parse(request)
        from .aio import AsyncDynamoDBLedger

        return await AsyncDynamoDBLedger.open(target, async_factory(target))

    def setup(self, request: OpenRequest) -> LedgerInfo:
        """Create the table (on-demand, deletion protection on), wait until it is ACTIVE,
        write the namespace's genesis; idempotent."""
        target = parse(request.with_options(create=True))
        from .ledger import DynamoDBLedger

        ledger = DynamoDBLedger.open(target, sync_factory(target))
        try:
            return ledger.describe()
        finally:
            ledger.close()

    # Delegates until the registry resolves ``testing`` itself.
    def remove_scratch(self, url: LedgerURL, prefix: str) -> int:
        from .testing import HOOKS

        return HOOKS.remove_scratch(url, prefix)

    def reroute(self, url: LedgerURL, route: Route) -> str | None:
        from .testing import HOOKS

        return HOOKS.reroute(url, route)


BACKEND = _DynamoDBBackend()

__all__ = ["BACKEND", "LedgerError", "Settings", "client_config"]
