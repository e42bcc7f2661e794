"""The HTTP service: crawls started, watched and reported over a JSON API.

Architecture, outside in (each module owns one thing):

- ``app``: the aiohttp application and ``serve`` (listen, SIGTERM, shutdown).
- ``routes``: every route once; ``openapi`` generates the document from it.
- ``middleware``: errors as JSON, the token and origin guard, request logs.
- ``handlers`` (JSON API, health, metrics) and ``dashboard`` (static files).
- ``schemas``: pydantic request and response bodies.
- ``manager``: crawl states, the queue, at most ``--max-running`` at once,
  resume after a restart. ``runs``: one crawl's run (``crawler.runner``).
- storage is a ``crawler.store.service.ServiceStore``: SQLite files
  (``DATA/service.db``, ``DATA/crawls/<id>.db`` for one-off crawls,
  ``DATA/definitions/<id>.db`` for a definition's runs), or one PostgreSQL
  database (``--db``) whose running crawls ``crawler work --service``
  processes join. ``progress``: live counters and per-worker rates.
  ``metrics``: Prometheus.
- ``safety``: private-address and credential rules, token comparison.
- ``config``: the service's own settings.
"""
