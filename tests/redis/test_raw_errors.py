"""Issue 8 item 6 on a real Redis: a genesis key of the wrong type is a LedgerError.

Before: ``HSET`` on the genesis key gave a ``TypeError`` out of ``open_ledger`` and the CLI
printed a traceback and exited 1, "not spent".
"""

from __future__ import annotations

import uuid

import pytest
import redis

from ledger_core import LedgerError, open_ledger
from ledger_core.cli import main
from ledger_redis import commands


def test_a_wrong_type_genesis_key_is_a_ledger_error(
    redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    namespace = f"wrongtype-{uuid.uuid4().hex}"
    client = redis.Redis.from_url(redis_url)
    client.hset(commands.genesis_key(namespace), "x", "y")
    try:
        with pytest.raises(LedgerError):
            open_ledger(redis_url, namespace=namespace)
        code = main(["store-id", redis_url, "--namespace", namespace])
        _, err = capsys.readouterr()
        assert code not in (0, 1)
        assert "Traceback" not in err
        assert len(err.strip().splitlines()) == 1
    finally:
        client.delete(commands.genesis_key(namespace))
        client.close()
