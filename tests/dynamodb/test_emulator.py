"""The harness's dynalite survives what a ledger does to it on purpose: a whole-call
deadline closes a socket while a request's body is still on its way, and a dynalite that
dies of it fails every later test of the session, far from the cause."""

from __future__ import annotations

import socket
import struct

import boto3
import pytest

from tests.servers import dynamodb as servers

pytestmark = pytest.mark.skipif(
    servers.dynalite_binary() is None, reason=f"no dynalite here: {servers.INSTALL_HINT}"
)


def _abort_mid_body(port: int) -> None:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    head = (
        "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-amz-json-1.0\r\n"
        "X-Amz-Target: DynamoDB_20120810.ListTables\r\nContent-Length: 1000\r\n\r\n{"
    )
    sock.sendall(head.encode())
    # SO_LINGER 0: close with a reset, as a socket shut mid-request by a deadline does
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def test_dynalite_survives_a_request_aborted_mid_body() -> None:
    with servers.local_dynalite() as server:
        client = boto3.client("dynamodb", region_name=servers.REGION, endpoint_url=server.endpoint)
        for _ in range(3):
            _abort_mid_body(server.port)
        assert client.list_tables()["TableNames"] == []
        assert server.proc is not None
        assert server.proc.poll() is None
