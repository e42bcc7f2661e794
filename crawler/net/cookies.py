"""``--cookie-jar FILE``: cookies read before the crawl and written after it.

The file is in the Netscape format curl and browsers' exporters use, so a
jar exported from a logged-in browser session works as it is.
"""

from __future__ import annotations

import http.cookiejar
import time
from http.cookies import Morsel
from pathlib import Path

import aiohttp
from yarl import URL

from crawler.errors import UsageError


def load(jar: aiohttp.CookieJar, path: str) -> None:
    """Fill ``jar`` from a Netscape cookie file (a missing file is an empty jar)."""
    if not Path(path).exists():
        return
    source = http.cookiejar.MozillaCookieJar(path)
    try:
        source.load(ignore_discard=True, ignore_expires=True)
    except (OSError, http.cookiejar.LoadError) as exc:
        raise UsageError(f"cannot read cookie jar {path}: {exc}") from exc
    now = time.time()
    for cookie in source:
        if cookie.expires and cookie.expires < now:  # 0 means a session cookie (curl)
            continue
        domain = cookie.domain.lstrip(".")
        scheme = "https" if cookie.secure else "http"
        morsel: Morsel[str] = Morsel()
        morsel.set(cookie.name, cookie.value or "", cookie.value or "")
        morsel["path"] = cookie.path or "/"
        if cookie.domain.startswith("."):
            morsel["domain"] = domain
        jar.update_cookies({cookie.name: morsel}, response_url=URL(f"{scheme}://{domain}/"))


def save(jar: aiohttp.CookieJar, path: str) -> None:
    """Write every cookie of ``jar`` to a Netscape cookie file."""
    target = http.cookiejar.MozillaCookieJar(path)
    for morsel in jar:
        domain = morsel["domain"] or ""
        target.set_cookie(
            http.cookiejar.Cookie(
                version=0,
                name=morsel.key,
                value=morsel.value,
                port=None,
                port_specified=False,
                domain=domain,
                domain_specified=bool(domain),
                domain_initial_dot=domain.startswith("."),
                path=morsel["path"] or "/",
                path_specified=True,
                secure=bool(morsel["secure"]),
                expires=None,
                discard=False,
                comment=None,
                comment_url=None,
                rest={},
            )
        )
    try:
        target.save(ignore_discard=True, ignore_expires=True)
    except OSError as exc:
        raise UsageError(f"cannot write cookie jar {path}: {exc.strerror}") from exc
