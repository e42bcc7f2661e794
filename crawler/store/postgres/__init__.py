"""The PostgreSQL backend: many worker processes, on many machines, on one crawl.

``PostgresFrontier`` implements ``crawler.store.base.FrontierStore`` with
asyncpg, so the engine, the runner and robots.txt handling run unchanged; the
SQL keeps the SQLite backend's semantics (``crawler.store.frontier``).

- ``loop``: the store's own event loop thread, which owns the connection pool;
- ``schema``: connecting, the numbered migrations (``migrations/postgresql``);
- ``crawls``: crawl rows (create, find, elapsed time);
- ``discover``: turning found URLs into rows in batches (dedup, kind upgrade,
  ``--max-urls``, ``--max-cache-age``);
- ``frontier``: the contract (lease, renew, reclaim, quiescence, ...);
- ``complete``: the group commit of fetched rows;
- ``gate``: per-host politeness as shared rows (``crawler.politeness_pg``);
- ``report``: the read side, the same ``ReportData`` as ``crawler.report.load``.
"""

# Nothing is imported here: ``crawler.politeness_pg`` needs only ``gate``, and
# a SQLite crawl should not load asyncpg.
