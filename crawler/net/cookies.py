"""The crawl's cookie jar, and ``--cookie-jar FILE`` import and export.

``CrawlJar`` is aiohttp's ``CookieJar``: it decides which cookie goes to which
request (domain, path, secure and expiry rules). What it adds is bookkeeping
for the store: each response that sets or deletes cookies leaves the changed
cookies in ``take_changes`` (with their absolute expiry), so they can be
written with the crawl and ``merge``d into another worker's jar or a resumed
run's. It keeps at most ``max_per_host`` cookies for a host; further new ones
are refused.

The file is in the Netscape format curl and browsers' exporters use, so a jar
exported from a logged-in browser session works as it is; expiry survives a
save and a load.
"""

from __future__ import annotations

import email.utils
import http.cookiejar
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from http.cookies import CookieError, Morsel, SimpleCookie
from pathlib import Path
from typing import Any, cast

from yarl import URL

from crawler.errors import UsageError
from crawler.models import Cookie
from crawler.net.aio_client import aiohttp

Key = tuple[str, str, str]  # (domain, path, name)
_DECODER: SimpleCookie = SimpleCookie()
_NO_URL = URL()


class CrawlJar(aiohttp.CookieJar):
    """aiohttp's jar, noting what each response changed (see module docstring)."""

    def __init__(self, max_per_host: int) -> None:
        super().__init__(unsafe=True)  # crawls of sites addressed by IP keep cookies too
        self._max_per_host = max_per_host
        self._expiry: dict[Key, float | None] = {}
        self._changes: dict[Key, Cookie] = {}

    # -- what aiohttp's session calls -----------------------------------------

    def update_cookies(self, cookies: Any, response_url: URL = _NO_URL) -> None:
        items = list(cookies.items() if isinstance(cookies, Mapping) else cookies)
        host = response_url.raw_host
        before = self._keys_for(host) if host else None
        super().update_cookies(items, response_url)
        if host and before is not None:
            self._note(host, {name for name, _ in items}, before)

    def update_cookies_from_headers(self, headers: Sequence[str], response_url: URL) -> None:
        host = response_url.raw_host
        before = self._keys_for(host) if host else None
        super().update_cookies_from_headers(headers, response_url)
        if host and before is not None:
            names = {header.split("=", 1)[0].strip() for header in headers}
            self._note(host, names, before)

    # -- what the crawl's own client calls (crawler.net.fetch) -------------------

    def cookie_header(self, url: URL, given: str = "") -> str:
        """The ``Cookie`` header for a request to ``url``: a ``given`` one first, then the jar's."""
        found = self.filter_cookies(url)
        if not found:
            return given
        pairs = "; ".join(f"{name}={morsel.coded_value}" for name, morsel in found.items())
        return f"{given}; {pairs}" if given else pairs

    def take_set_cookies(self, headers: Sequence[str], url: URL) -> None:
        """An answer's ``Set-Cookie`` headers, as aiohttp's session gives them to its jar."""
        if hasattr(aiohttp.CookieJar, "update_cookies_from_headers"):  # aiohttp 3.12 and later
            self.update_cookies_from_headers(headers, url)
            return
        parsed: SimpleCookie = SimpleCookie()
        for header in headers:
            try:
                parsed.load(header)
            except CookieError:
                continue  # one bad cookie does not lose the others
        self.update_cookies(parsed, url)

    # -- for the store ---------------------------------------------------------

    def take_changes(self) -> list[Cookie]:
        """Cookies set or deleted since the last call (a deletion is expired)."""
        changes, self._changes = self._changes, {}
        return list(changes.values())

    def merge(
        self, cookies: Iterable[Cookie], now: float | None = None, *, is_new: bool = False
    ) -> None:
        """Take cookies another worker (or an earlier run) stored; expired ones delete.

        ``is_new`` cookies (imported from a file) are also changes for the store.
        """
        now = time.time() if now is None else now
        gone: set[Key] = set()
        for cookie in cookies:
            key = (cookie.domain, cookie.path, cookie.name)
            if not is_new and key in self._changes:
                continue  # this jar's own change, newer and not yet stored
            if cookie.is_expired(now):
                gone.add(key)
                self._expiry.pop(key, None)
                continue
            try:
                morsel = _morsel(cookie)
            except CookieError:  # a name the standard library refuses (e.g. "expires")
                continue
            scheme = "https" if cookie.secure else "http"
            url = URL.build(scheme=scheme, host=cookie.domain, path="/")
            super().update_cookies({cookie.name: morsel}, url)
            self._expiry[key] = cookie.expires_at
            if is_new:
                self._changes[key] = cookie
        if gone:
            self.clear(lambda m: (m["domain"], m["path"] or "/", m.key) in gone)

    def export(self) -> list[Cookie]:
        """Every live cookie with its absolute expiry (for ``--cookie-jar`` files)."""
        return [self._cookie(m) for m in self]

    # -- internals ---------------------------------------------------------------

    def _keys_for(self, host: str) -> dict[Key, Morsel[str]]:
        """The cookies a request to ``host`` could carry, by key."""
        return {
            _key(m): m for m in self if m["domain"] == host or host.endswith("." + str(m["domain"]))
        }

    def _note(self, host: str, names: set[str], before: dict[Key, Morsel[str]]) -> None:
        after = self._keys_for(host)
        now = time.time()
        refused = [key for key in after if key not in before][
            max(self._max_per_host - len(before), 0) :
        ]
        if refused:
            drop = set(refused)
            self.clear(lambda m: _key(m) in drop)
            for key in refused:
                del after[key]
        for key, morsel in after.items():
            if key[2] in names:
                self._expiry[key] = _expires_at(morsel, now)
                self._changes[key] = self._cookie(morsel)
        for key in before.keys() - after.keys():
            self._expiry.pop(key, None)
            self._changes[key] = Cookie(*key, value="", expires_at=0.0)

    def _cookie(self, morsel: Morsel[str]) -> Cookie:
        domain, path, name = key = _key(morsel)
        return Cookie(
            domain=domain,
            path=path,
            name=name,
            value=morsel.coded_value,
            host_only=(domain, path.rstrip("/"), name) in self._host_only_keys(),
            secure=bool(morsel["secure"]),
            http_only=bool(morsel["httponly"]),
            expires_at=self._expiry.get(key),
        )

    def _host_only_keys(self) -> Collection[Key]:
        """The host-only cookies (a public property in recent aiohttp, private before)."""
        keys = getattr(self, "host_only_cookies", None)
        if keys is None:
            keys = getattr(self, "_host_only_cookies", ())
        return cast("Collection[Key]", keys)


def _key(morsel: Morsel[str]) -> Key:
    return (str(morsel["domain"]), str(morsel["path"] or "/"), morsel.key)


def _expires_at(morsel: Morsel[str], now: float) -> float | None:
    """A just-received cookie's absolute expiry: Max-Age wins over Expires (RFC 6265)."""
    max_age = str(morsel["max-age"] or "")
    if max_age:
        try:
            return now + int(max_age)
        except ValueError:
            pass
    parsed = email.utils.parsedate_tz(str(morsel["expires"] or ""))
    return None if parsed is None else float(email.utils.mktime_tz(parsed))


def _morsel(cookie: Cookie) -> Morsel[str]:
    """A morsel aiohttp's jar takes as if a server had sent this cookie."""
    morsel: Morsel[str] = Morsel()
    value, coded = _DECODER.value_decode(cookie.value)
    morsel.set(cookie.name, value, coded)
    morsel["path"] = cookie.path
    if not cookie.host_only:
        morsel["domain"] = cookie.domain
    if cookie.secure:
        morsel["secure"] = True
    if cookie.http_only:
        morsel["httponly"] = True
    if cookie.expires_at is not None:
        morsel["expires"] = email.utils.formatdate(cookie.expires_at, usegmt=True)
    return morsel


def load(jar: CrawlJar, path: str) -> None:
    """Fill ``jar`` from a Netscape cookie file (a missing file is an empty jar)."""
    if not Path(path).exists():
        return
    source = http.cookiejar.MozillaCookieJar(path)
    try:
        source.load(ignore_discard=True, ignore_expires=True)
    except (OSError, http.cookiejar.LoadError) as exc:
        raise UsageError(f"cannot read cookie jar {path}: {exc}") from exc
    now = time.time()
    found: list[Cookie] = []
    for cookie in source:
        if cookie.expires and cookie.expires < now:  # 0 means a session cookie (curl)
            continue
        found.append(
            Cookie(
                domain=cookie.domain.lstrip("."),
                path=cookie.path or "/",
                name=cookie.name,
                value=cookie.value or "",
                host_only=not cookie.domain.startswith("."),
                secure=cookie.secure,
                expires_at=float(cookie.expires) if cookie.expires else None,
            )
        )
    jar.merge(found, now, is_new=True)  # the crawl's store keeps them too


def save(jar: CrawlJar, path: str) -> None:
    """Write every live cookie of ``jar``, with its expiry, to a Netscape cookie file."""
    target = http.cookiejar.MozillaCookieJar(path)
    for cookie in jar.export():
        target.set_cookie(
            http.cookiejar.Cookie(
                version=0,
                name=cookie.name,
                value=cookie.value,
                port=None,
                port_specified=False,
                domain=cookie.domain if cookie.host_only else "." + cookie.domain,
                domain_specified=not cookie.host_only,
                domain_initial_dot=not cookie.host_only,
                path=cookie.path,
                path_specified=True,
                secure=cookie.secure,
                expires=None if cookie.expires_at is None else int(cookie.expires_at),
                discard=cookie.expires_at is None,
                comment=None,
                comment_url=None,
                rest={"HttpOnly": ""} if cookie.http_only else {},
            )
        )
    try:
        target.save(ignore_discard=True, ignore_expires=True)
    except OSError as exc:
        raise UsageError(f"cannot write cookie jar {path}: {exc.strerror}") from exc
