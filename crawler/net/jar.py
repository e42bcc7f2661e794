"""The crawl's cookie jar, made when the first cookie arrives.

Most sites a link checker crawls set no cookie, and the jar underneath
(``crawler.net.cookies.CrawlJar``, aiohttp's ``CookieJar``) costs aiohttp's
import at start-up. ``Jar`` answers for an empty jar itself and makes the
real one at the first ``Set-Cookie``, stored cookie (a resumed run, another
worker) or ``--cookie-jar`` file; from then on it hands every call on.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from yarl import URL

from crawler.models import Cookie

if TYPE_CHECKING:
    from crawler.net.cookies import CrawlJar


class Jar:
    """A ``CrawlJar`` made on first use (see the module docstring)."""

    def __init__(self, max_per_host: int) -> None:
        self._max_per_host = max_per_host
        self._jar: CrawlJar | None = None

    def real(self) -> CrawlJar:
        """The jar underneath, made now if it was not yet."""
        if self._jar is None:
            from crawler.net.cookies import CrawlJar

            self._jar = CrawlJar(self._max_per_host)
        return self._jar

    def cookie_header(self, url: URL | str, given: str = "") -> str:
        """The ``Cookie`` header for a request to ``url`` (``CrawlJar.cookie_header``).

        ``url`` may be the URL's string: it is parsed only when the jar holds cookies.
        """
        if self._jar is None:
            return given
        return self._jar.cookie_header(_as_url(url), given)

    def take_set_cookies(self, headers: Sequence[str], url: URL | str) -> None:
        self.real().take_set_cookies(headers, _as_url(url))

    def merge(
        self, cookies: Iterable[Cookie], now: float | None = None, *, is_new: bool = False
    ) -> None:
        found = list(cookies)
        if found or self._jar is not None:
            self.real().merge(found, now, is_new=is_new)

    def take_changes(self) -> list[Cookie]:
        return [] if self._jar is None else self._jar.take_changes()


def _as_url(url: URL | str) -> URL:
    return url if isinstance(url, URL) else URL(url, encoded=True)
