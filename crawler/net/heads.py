"""A request's line and header block as bytes, the crawl's own headers serialized once.

What aiohttp sent is sent still: the user agent and ``--header`` values,
``Accept: */*``, the encodings the fetcher decodes, ``Host`` (unless a header
sets it); a request's own headers (credentials, a host's settings, a
re-crawl's validators, cookies) replace the crawl's of the same name.
"""

from __future__ import annotations

from collections.abc import Mapping

from crawler.urls import DEFAULT_PORTS

ACCEPT_ENCODING = "gzip, deflate, br"  # what crawler.net.http1 decodes

Fields = dict[str, tuple[str, str]]  # lower-case name: (name as given, value)


class RequestHeads:
    """Builds the bytes written before a GET or HEAD (no body is ever sent)."""

    def __init__(self, headers: Mapping[str, str]) -> None:
        fields: Fields = {
            "accept": ("Accept", "*/*"),
            "accept-encoding": ("Accept-Encoding", ACCEPT_ENCODING),
        }
        fields.update(_fields(headers))
        self._fields = fields
        self._block = _serialize(fields)

    def build(
        self,
        method: str,
        target: str,
        host: str,
        extra: Mapping[str, str] | None = None,
    ) -> bytes:
        """``target`` is the encoded path and query; ``host`` the Host header's value."""
        if any(c in target for c in " \r\n"):
            raise ValueError(f"a request target cannot hold spaces or line breaks: {target!r}")
        line = f"{method} {target} HTTP/1.1\r\n"
        if not extra:
            if "host" in self._fields:
                return (line + self._block + "\r\n").encode("utf-8", "surrogateescape")
            return (line + "Host: " + host + "\r\n" + self._block + "\r\n").encode(
                "utf-8", "surrogateescape"
            )
        fields = {**self._fields, **_fields(extra)}
        if "host" not in fields:
            fields = {"host": ("Host", host), **fields}
        return (line + _serialize(fields) + "\r\n").encode("utf-8", "surrogateescape")


def host_header(scheme: str, host: str, port: int) -> str:
    """``Host``'s value: the name (an IPv6 address in brackets), its port unless the default."""
    name = f"[{host}]" if ":" in host else host
    if str(port) == DEFAULT_PORTS.get(scheme):
        return name
    return f"{name}:{port}"


def _fields(headers: Mapping[str, str]) -> Fields:
    return {name.lower(): (name, value) for name, value in headers.items()}


def _serialize(fields: Fields) -> str:
    lines = []
    for name, value in fields.values():
        if any(c in name or c in value for c in "\r\n") or ":" in name:
            raise ValueError(f"header {name!r} holds a line break or a colon")
        lines.append(f"{name}: {value}\r\n")
    return "".join(lines)
