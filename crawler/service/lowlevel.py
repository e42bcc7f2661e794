"""aiohttp's own error answers (a bad request line, bad headers, a handler that hung) as JSON.

Requests aiohttp cannot parse never reach the middlewares that turn every
``ApiError`` into an ``ErrorBody``: aiohttp answers them itself, in plain
text. ``json_errors`` switches the server to a request handler whose
``handle_error`` answers with the same JSON shape as every other error, so a
client never has to parse two kinds of error. The status and the connection
close are aiohttp's; a 500 says nothing about the internals (the log does).
"""

from __future__ import annotations

from http import HTTPStatus

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from crawler.service.schemas import ErrorBody

MAX_MESSAGE_CHARS = 200


class _JsonErrorHandler(RequestHandler):
    __slots__ = ()

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        plain = super().handle_error(request, status, exc, message)  # logs; raises if too late
        phrase = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else "Error"
        text = phrase
        if status < 500 and message:
            text = f"{phrase}: {message.splitlines()[0][:MAX_MESSAGE_CHARS]}"
        body = ErrorBody(error=text, field=None).model_dump_json()
        response = web.Response(status=plain.status, text=body, content_type="application/json")
        response.force_close()
        return response


class _JsonErrorServer(web.Server):
    __slots__ = ()

    def __call__(self) -> RequestHandler:
        return _JsonErrorHandler(self, loop=self._loop, **self._kwargs)


def json_errors(server: web.Server) -> None:
    """Make ``server`` (set up, not yet serving) answer its own errors in JSON."""
    server.__class__ = _JsonErrorServer
