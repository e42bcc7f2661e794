"""Network adapters: fetching, name resolution under the address guard, robots.txt,
sitemaps, cookies and local files. Everything that sends a request lives here."""

from crawler.net import tls as _tls

_tls.import_aiohttp()  # before any module here imports aiohttp: its CA store is read when used
