"""A reverse proxy on loopback, configured as nginx is, in a background thread.

``mode="nginx-default"`` is nginx's ``proxy_pass`` with no other directive:
the upstream sees ``Host: 127.0.0.1:PORT`` (the upstream's own address) and
no forwarding header, so every request looks local. ``mode="documented"`` is
the configuration the README gives: the client's Host is passed on and
``X-Forwarded-For`` / ``X-Forwarded-Proto`` are added.
"""

from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Literal, Self

Mode = Literal["nginx-default", "documented"]
HOP_BY_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "host"})


class ReverseProxy:
    """Forwards every request to ``127.0.0.1:upstream_port``; a context manager."""

    def __init__(self, upstream_port: int, mode: Mode) -> None:
        self.upstream_port = upstream_port
        self.mode = mode
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                proxy.forward(self)

            do_POST = do_GET
            do_DELETE = do_GET

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def forward(self, request: BaseHTTPRequestHandler) -> None:
        length = int(request.headers.get("Content-Length") or 0)
        body = request.rfile.read(length) if length else None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        if self.mode == "nginx-default":
            headers["Host"] = f"127.0.0.1:{self.upstream_port}"  # $proxy_host
        else:
            headers["Host"] = request.headers.get("Host", "")  # proxy_set_header Host $host
            headers["X-Forwarded-For"] = request.client_address[0]
            headers["X-Forwarded-Proto"] = "https"
        upstream = http.client.HTTPConnection("127.0.0.1", self.upstream_port, timeout=15)
        try:
            upstream.request(request.command, request.path, body=body, headers=headers)
            answer = upstream.getresponse()
            data = answer.read()
        finally:
            upstream.close()
        request.send_response(answer.status)
        for name, value in answer.getheaders():
            if name.lower() not in HOP_BY_HOP and name.lower() != "content-length":
                request.send_header(name, value)
        request.send_header("Content-Length", str(len(data)))
        request.end_headers()
        request.wfile.write(data)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)
