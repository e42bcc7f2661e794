"""The HTTP service: crawls started, watched and reported over a JSON API.

Architecture, outside in (each module owns one thing):

- ``app``: the aiohttp application and ``serve`` (listen, SIGTERM, shutdown).
- ``routes``: every route once; ``openapi`` generates the document from it.
- ``middleware``: errors as JSON, the token and origin guard, request logs.
- ``handlers`` (JSON API, health, metrics) and ``dashboard`` (static files).
- ``schemas``: pydantic request and response bodies.
- ``manager``: crawl states, the queue, at most ``--max-running`` at once,
  resume after a restart. ``runs``: one crawl's run (``crawler.runner``).
- ``index``: ``DATA/service.db``, the list of crawls and their states; each
  crawl's results are in ``DATA/crawls/<id>.db``. ``reads``: read-only queries
  on those files. ``progress``: live counters. ``metrics``: Prometheus.
- ``safety``: private-address and credential rules, token comparison.
- ``config``: the service's own settings.
"""
