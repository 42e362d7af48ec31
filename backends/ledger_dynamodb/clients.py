"""What the ledger needs to know of a host's client: described as a :class:`Target`, and
a forked child's copy of it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ledger_core.opening import OpenRequest

from .options import LEDGER_OPTIONS, Target, parse

CLIENT_OPTIONS = LEDGER_OPTIONS - {"timeout"}  # a host's client keeps its own timeouts


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


def like(client: Any) -> dict[str, Any]:
    """What a client like the host's is built with (a forked child's own)."""
    meta = client.meta
    return {
        "region_name": meta.region_name,
        "endpoint_url": meta.endpoint_url,
        "config": meta.config,
    }


def carry_credentials(old: Any, new: Any) -> Any:
    """``new`` signing with ``old``'s credentials. botocore has no public accessor of a
    client's credentials (they live on its request signer): without this a child signs
    with the environment's, or none (test_a_child_of_a_host_client_signs_with_its_credentials)."""
    creds = getattr(getattr(old, "_request_signer", None), "_credentials", None)
    signer = getattr(new, "_request_signer", None)
    if creds is not None and signer is not None:
        signer._credentials = creds
    return new
