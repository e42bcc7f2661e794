"""aiohttp, imported with its CA store's loading deferred (``crawler.net.tls``).

The crawl's own requests do not use aiohttp (``crawler.net.pool``): it is
imported by the modules that need it (proxied requests, the cookie jar, the
renderer's DevTools client) through this one, so that whichever comes first
defers the CA store's loading as ``crawler.net`` used to for every process.
"""

from crawler.net import tls

tls.import_aiohttp()

import aiohttp  # noqa: E402
import aiohttp.abc  # noqa: E402

__all__ = ["aiohttp"]
