"""Requests aiohttp itself refuses (bad request line, bad headers) get JSON errors too."""

from __future__ import annotations

import json
import socket

import pytest

from kit.servicekit import ServiceProcess

READ_TIMEOUT_S = 15.0
BAD_REQUESTS = [
    b"GARBAGE\r\n\r\n",  # no method, target or version
    b"GET / HTTP/9.9\r\nHost: 127.0.0.1\r\n\r\n",  # unknown version
    b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nBad Header Line\r\n\r\n",  # no colon
    b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX\x01Y: z\r\n\r\n",  # control byte in a name
    b"POST /crawls HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: x\r\n\r\n",  # bad length
]


def _raw(port: int, request: bytes) -> tuple[int, dict[str, str], bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=READ_TIMEOUT_S) as client:
        client.sendall(request)
        data = b""
        while chunk := client.recv(65536):  # aiohttp closes the connection after its error
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    return int(status_line.split()[1]), headers, body


@pytest.mark.parametrize("request_bytes", BAD_REQUESTS)
def test_a_request_aiohttp_cannot_parse_gets_a_json_error(
    service: ServiceProcess, request_bytes: bytes
) -> None:
    status, headers, body = _raw(service.port, request_bytes)
    assert 400 <= status < 500
    assert headers["content-type"].startswith("application/json")
    error = json.loads(body)
    assert set(error) == {"error", "field", "details"}
    assert error["error"].startswith("Bad Request") or status != 400
    assert service.request("GET", "/healthz", auth=False).status == 200
