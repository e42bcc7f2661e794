"""The PostgreSQL backend: many worker processes, on many machines, on one crawl.

``PostgresFrontier`` implements ``crawler.store.contract.FrontierStore`` with
asyncpg, so the engine, the runner and robots.txt handling run unchanged. It
keeps the contract's meaning (tests/store/ runs the same tests on both
backends) with PostgreSQL's own schema and statements.

- ``loop``: the store's own event loop thread, which owns the connection pool;
- ``schema``: connecting, the numbered migrations (``migrations/postgresql``);
- ``crawls``: crawl rows (create, find, elapsed time);
- ``discover``: turning found URLs into rows in batches (dedup, kind upgrade,
  ``--max-urls``, ``--max-cache-age``);
- ``frontier``: the contract (lease, renew, reclaim, quiescence, ...);
- ``complete``: the group commit of fetched rows;
- ``finish_watch``: an idle worker told by ``NOTIFY`` that another finished the crawl;
- ``gate``, ``host_gate``: per-host politeness as rows shared by workers;
- ``vacuum``: vacuuming the queue table when the server's autovacuum is off;
- ``report``: the read side, the same ``ReportData`` as ``crawler.report.load``.
"""

# Nothing is imported here: a SQLite crawl should not load asyncpg.
