"""The service's flags, their defaults and their ``CRAWLER_*`` variables.

Apart from ``crawler.service.config`` (the pydantic model that validates
them): ``crawler --help`` and every other command build the ``serve``
subcommand's flags, and need none of the service's modules for that.
"""

from __future__ import annotations

import argparse
from typing import Literal

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
DEFAULT_DATA_DIR = "crawler-data"
DEFAULT_MAX_RUNNING = 2
DEFAULT_LOG_LEVEL: Literal["info"] = "info"
DEFAULT_LOG_FORMAT: Literal["json"] = "json"
# What one crawl created over HTTP may ask for (the operator raises or lowers it):
# 4,096 connections with no interval would make the service a traffic amplifier.
DEFAULT_MAX_CRAWL_CONCURRENCY = 64
DEFAULT_MAX_HOST_CONCURRENCY = 8
# Slow clients: a request's headers and body must arrive within these, and at
# most this many connections are open at once (the rest wait in the backlog).
DEFAULT_READ_TIMEOUT_S = 15.0
DEFAULT_MAX_CONNECTIONS = 256
TOKEN_FILE = "token"  # noqa: S105 - a file name, not a secret

# field -> environment variable; flags are derived from the same names.
ENVIRONMENT = {
    "host": "CRAWLER_HOST",
    "port": "CRAWLER_PORT",
    "data_dir": "CRAWLER_DATA_DIR",
    "db": "CRAWLER_DB",
    "token": "CRAWLER_TOKEN",
    "max_running": "CRAWLER_MAX_RUNNING",
    "allow_private": "CRAWLER_ALLOW_PRIVATE",
    "allow_networks": "CRAWLER_ALLOW_NETWORKS",
    "log_level": "CRAWLER_LOG_LEVEL",
    "log_format": "CRAWLER_LOG_FORMAT",
    "shutdown_timeout_s": "CRAWLER_SHUTDOWN_TIMEOUT_S",
    "no_token": "CRAWLER_NO_TOKEN",
    "public_reads": "CRAWLER_PUBLIC_READS",
    "allowed_hosts": "CRAWLER_ALLOWED_HOSTS",
    "local_roots": "CRAWLER_LOCAL_ROOTS",
    "max_crawl_concurrency": "CRAWLER_MAX_CRAWL_CONCURRENCY",
    "max_host_concurrency": "CRAWLER_MAX_HOST_CONCURRENCY",
    "read_timeout_s": "CRAWLER_READ_TIMEOUT_S",
    "max_connections": "CRAWLER_MAX_CONNECTIONS",
    "memory_budget": "CRAWLER_MEMORY_BUDGET",
    "public_url": "CRAWLER_PUBLIC_URL",
}
BOOLEANS = ("allow_private", "no_token", "public_reads")
LISTS = ("allow_networks", "allowed_hosts", "local_roots")

# Flags whose name is not the field's (a repeatable flag is singular).
FLAGS = {
    "allow_networks": "--allow-network",
    "allowed_hosts": "--allowed-host",
    "local_roots": "--local-root",
}


def add_serve_options(parser: argparse.ArgumentParser) -> None:
    """The service's flags; an absent flag leaves the environment or default in force."""
    env = ENVIRONMENT
    parser.add_argument(
        "--host",
        help=f"address to listen on (default {DEFAULT_HOST}; "
        f"anything but loopback needs a token) [{env['host']}]",
    )
    parser.add_argument(
        "--port",
        type=int,
        help=f"port (default {DEFAULT_PORT}; 0 picks a free one) [{env['port']}]",
    )
    parser.add_argument(
        "--data-dir",
        metavar="DIR",
        help=f"where crawls are kept (default ./{DEFAULT_DATA_DIR}) [{env['data_dir']}]",
    )
    parser.add_argument(
        "--db",
        metavar="URL",
        help="postgresql://user@host/dbname: keep the index and the crawls in PostgreSQL, "
        "where `crawler work --service --db URL` processes on other machines join them "
        f"(default: SQLite files under the data directory) [{env['db']}]",
    )
    parser.add_argument(
        "--token",
        help="bearer token for POST and DELETE; prefer the environment variable, "
        f"flags show in `ps` [{env['token']}]",
    )
    parser.add_argument(
        "--max-running",
        type=int,
        metavar="N",
        help=f"crawls running at once; the others queue (default "
        f"{DEFAULT_MAX_RUNNING}) [{env['max_running']}]",
    )
    parser.add_argument(
        "--allow-private",
        action="store_true",
        default=None,
        help="let crawls reach private, loopback and link-local addresses "
        f"[{env['allow_private']}]",
    )
    parser.add_argument(
        "--allow-network",
        action="append",
        dest="allow_networks",
        metavar="CIDR",
        help="let crawls reach this private network, e.g. 10.1.0.0/16 (repeatable) "
        f"[{env['allow_networks']}, comma-separated]",
    )
    parser.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        help=f"default {DEFAULT_LOG_LEVEL} [{env['log_level']}]",
    )
    parser.add_argument(
        "--log-format",
        choices=("console", "json"),
        help=f"default {DEFAULT_LOG_FORMAT} [{env['log_format']}]",
    )
    parser.add_argument(
        "--shutdown-timeout",
        type=float,
        metavar="SECONDS",
        dest="shutdown_timeout_s",
        help=f"on SIGTERM, how long in-flight requests may finish [{env['shutdown_timeout_s']}]",
    )
    parser.add_argument(
        "--public-url",
        metavar="URL",
        help="the address users reach the service at, e.g. https://crawler.example.org "
        "(a path prefix is kept): webhook bodies link to reports under it; unset, they "
        f"carry relative paths [{env['public_url']}]",
    )
    add_security_options(parser)


def add_security_options(parser: argparse.ArgumentParser) -> None:
    """The flags of the service's safety limits (``crawler serve --help``)."""
    env = ENVIRONMENT
    parser.add_argument(
        "--no-token",
        action="store_true",
        default=None,
        help="serve without a token (reads and writes open to whoever reaches the port; "
        "loopback only, never behind a proxy). Without this or a token, one is generated "
        f"in DATA_DIR/{TOKEN_FILE} [{env['no_token']}]",
    )
    parser.add_argument(
        "--public-reads",
        action="store_true",
        default=None,
        help=f"GET needs no token (reports show a site's structure) [{env['public_reads']}]",
    )
    parser.add_argument(
        "--allowed-host",
        action="append",
        dest="allowed_hosts",
        metavar="NAME",
        help="a Host header to answer besides loopback ones, e.g. crawler.example.org "
        f"(repeatable) [{env['allowed_hosts']}, comma-separated]",
    )
    parser.add_argument(
        "--local-root",
        action="append",
        dest="local_roots",
        metavar="DIR",
        help="let API seeds name directories under DIR (repeatable; none by default) "
        f"[{env['local_roots']}, comma-separated]",
    )
    parser.add_argument(
        "--max-crawl-concurrency",
        type=int,
        metavar="N",
        help=f"highest max_concurrency a crawl may ask for (default "
        f"{DEFAULT_MAX_CRAWL_CONCURRENCY}) [{env['max_crawl_concurrency']}]",
    )
    parser.add_argument(
        "--max-host-concurrency",
        type=int,
        metavar="N",
        help=f"highest host_concurrency a crawl may ask for (default "
        f"{DEFAULT_MAX_HOST_CONCURRENCY}) [{env['max_host_concurrency']}]",
    )
    parser.add_argument(
        "--read-timeout",
        type=float,
        metavar="SECONDS",
        dest="read_timeout_s",
        help=f"a request's headers and body must arrive within this (default "
        f"{DEFAULT_READ_TIMEOUT_S:g}) [{env['read_timeout_s']}]",
    )
    parser.add_argument(
        "--memory-budget",
        metavar="SIZE",
        help="memory the running crawls share, e.g. 512M or 1G; sizes body and link caps, "
        "parse helpers and pages in flight (default: 512M, the shipped container limit, or "
        f"the cgroup's limit when lower) [{env['memory_budget']}]",
    )
    parser.add_argument(
        "--max-connections",
        type=int,
        metavar="N",
        help=f"connections open at once (default {DEFAULT_MAX_CONNECTIONS}) "
        f"[{env['max_connections']}]",
    )
