"""What a crawl created over HTTP may do, and who may ask: pure decisions, no I/O.

- ``is_private_host``: a seed's host that is a private, loopback, link-local
  (or otherwise non-public) IP literal, or a ``localhost`` name. Seeds like
  that are refused unless the service runs with ``--allow-private``, or the
  address is in a network given with ``--allow-network``.
- ``guard_settings``: the crawl's settings as the service records them. Unless
  private addresses are allowed, ``exclude_all_private`` is switched on, so the
  engine also refuses discovered links and redirects (and names that resolve)
  to internal addresses. Settings that name files on the server are refused.
- ``check_limits``: the operator's caps on what one crawl may ask for.
- ``check_render_available``: a crawl that renders pages needs a browser on
  the server (looked up on PATH, the one lookup here), else it is refused.
- ``redact_settings``: settings as shown to readers, without credentials.
- ``token_matches``: the bearer token, compared in constant time.
- ``is_allowed_host``: the DNS-rebinding guard, for every request.
- ``nul_at``: where a request's JSON holds a NUL character, which no store
  keeps in a text (PostgreSQL refuses it): such a request is refused whole.
"""

from __future__ import annotations

import hmac
import ipaddress
import socket
from collections.abc import Sequence
from typing import Any

from crawler.config import CrawlSettings
from crawler.errors import UsageError
from crawler.net.render import process as browsers
from crawler.netguard import Allowed, is_private_address

# Settings whose value is a path on the server: a crawl created over HTTP must
# not make the service read or write files of its choosing.
SERVER_PATH_SETTINGS = ("cookie_jar", "root_dir", "browser")
REDACTED = "<redacted>"


def is_private_host(host: str, allowed: Allowed = ()) -> bool:
    """A non-public IP literal (any spelling ``inet_aton`` accepts) or a localhost name,
    outside the ``allowed`` networks (``--allow-network``)."""
    name = host.strip().lower().rstrip(".")
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    if name == "localhost" or name.endswith(".localhost"):
        return not any(ipaddress.ip_address("127.0.0.1") in net for net in allowed)
    try:
        ip: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.ip_address(name)
    except ValueError:
        try:  # 127.1, 0x7f.1, 2130706433: what resolvers accept as IPv4
            ip = ipaddress.IPv4Address(socket.inet_aton(name))
        except OSError:
            return False
    return is_private_address(str(ip), allowed)


def check_render_available(settings: CrawlSettings) -> None:
    """ValueError ("render: ...") when the crawl renders pages and the server has no browser."""
    if settings.may_render():
        try:
            browsers.find_browser(None)
        except UsageError as exc:
            raise ValueError(f"render: {exc}") from None


def guard_settings(
    settings: dict[str, Any], *, allow_private: bool, allow_networks: list[str] | None = None
) -> dict[str, Any]:
    """The settings recorded with a crawl created through the service.

    Raises ValueError naming the field for a setting the service refuses.
    """
    for name in SERVER_PATH_SETTINGS:
        if settings.get(name):
            raise ValueError(f"{name}: not available through the service (a path on the server)")
    guarded = dict(settings)
    if not allow_private:
        guarded["exclude_all_private"] = True
        # Only the service's operator widens what crawls may reach, never a request.
        guarded["allow_networks"] = list(allow_networks or [])
    return guarded


def check_guard_asked(settings: dict[str, Any], asked: set[str], *, allow_private: bool) -> None:
    """ValueError when a request tries to lower the address guard it cannot lower.

    Silently switching ``exclude_all_private`` back on would leave the caller
    believing the crawl reaches what it asked for.
    """
    if allow_private:
        return
    if "exclude_all_private" in asked and not settings.get("exclude_all_private"):
        raise ValueError(
            "exclude_all_private: always on in this service (its operator's --allow-private "
            "lifts it)"
        )
    if "allow_networks" in asked and settings.get("allow_networks"):
        raise ValueError(
            "allow_networks: set by this service's operator (--allow-network), not per crawl"
        )


def check_limits(settings: dict[str, Any], *, max_concurrency: int, max_host: int) -> None:
    """ValueError ("field: why") for a crawl asking more than the operator allows.

    Thousands of connections with no interval between requests would make
    the service a traffic amplifier for whoever may create crawls.
    """
    if settings.get("max_concurrency", 0) > max_concurrency:
        raise ValueError(
            f"max_concurrency: at most {max_concurrency} on this service "
            "(its operator's --max-crawl-concurrency)"
        )
    asked = [("host_concurrency", settings.get("host_concurrency"))]
    hosts = settings.get("hosts") or {}
    asked += [(f"hosts.{name}.concurrency", v.get("concurrency")) for name, v in hosts.items()]
    for name, value in asked:
        if value is not None and value > max_host:
            raise ValueError(
                f"{name}: at most {max_host} on this service "
                "(its operator's --max-host-concurrency)"
            )


def redact_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """Settings for a reader of the API: header values and credentials hidden."""
    shown = dict(settings)
    if shown.get("headers"):
        shown["headers"] = dict.fromkeys(shown["headers"], REDACTED)
    if shown.get("basic_auth"):
        shown["basic_auth"] = [
            f"{entry.partition(' ')[0]} {REDACTED}" for entry in shown["basic_auth"]
        ]
    hosts = shown.get("hosts")
    if isinstance(hosts, dict):
        shown["hosts"] = {
            name: {**value, "headers": dict.fromkeys(value.get("headers") or {}, REDACTED)}
            if isinstance(value, dict)
            else value
            for name, value in hosts.items()
        }
    return shown


def token_matches(header: str | None, token: str) -> bool:
    """``Authorization: Bearer <token>``, compared in constant time."""
    if not header:
        return False
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode(), token.encode())


def is_loopback_host_header(host_header: str | None) -> bool:
    """Is the Host header a loopback name? Blocks DNS rebinding."""
    return is_allowed_host(host_header, ())


def is_allowed_host(host_header: str | None, allowed: Sequence[str]) -> bool:
    """Is the Host header (port aside) a loopback name or one of ``allowed``?

    A page of attacker.example whose name now points at the service (DNS
    rebinding) sends ``Host: attacker.example``: refused, token or not.
    """
    if not host_header:
        return False
    name = host_header.strip().lower()
    if name.startswith("["):
        name = name[1 : name.find("]")] if "]" in name else name
    elif name.count(":") == 1:
        name = name.rsplit(":", 1)[0]
    name = name.rstrip(".")
    if name == "localhost" or name.endswith(".localhost") or name in allowed:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def nul_at(value: object) -> tuple[int | str, ...] | None:
    """The path of a string (or key) of decoded JSON holding a NUL, or None.

    Without recursion: a body nests as deep as the JSON parser lets it.
    """
    stack: list[tuple[object, tuple[int | str, ...]]] = [(value, ())]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return path
        elif isinstance(item, dict):
            for key, child in item.items():
                if "\x00" in key:
                    return (*path, key)
                stack.append((child, (*path, key)))
        elif isinstance(item, list):
            stack.extend((child, (*path, index)) for index, child in enumerate(item))
    return None
