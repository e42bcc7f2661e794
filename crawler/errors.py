"""The exception tree, and the failure kinds recorded on links.

Exceptions are for the program's own failures (bad usage, a database that is
not ours). Network and parse failures are not exceptions to the caller: the
fetcher turns them into a ``FailureKind`` recorded on the link.

    CrawlerError
    ├── UsageError          bad flags, config, URL or regex: exit 3
    ├── InvalidURLError     a URL that cannot be parsed (also a UsageError for seeds)
    └── StoreError          the database cannot be used
        ├── ForeignDatabaseError   not SQLite, not ours, or a newer schema: exit 3
        └── DiskFullError          SQLite reported the disk full
"""

from __future__ import annotations

import enum


class CrawlerError(Exception):
    """Base of every error this package raises on purpose."""


class UsageError(CrawlerError):
    """The user asked for something we cannot do; exit code 3."""


class InvalidURLError(UsageError, ValueError):
    """A URL that cannot be parsed or has no host."""


class StoreError(CrawlerError):
    """The database cannot be used."""


class DatabaseFailedError(StoreError):
    """The database failed under a running crawl (an I/O error, a lost connection).

    What was committed is kept: the crawl can be resumed. Each backend turns
    its driver's errors into this, so nothing above ``crawler/store`` needs to
    know which driver failed.
    """


class ForeignDatabaseError(StoreError, UsageError):
    """The file is not a crawler database we can open; it is left untouched."""


class DiskFullError(StoreError):
    """SQLite reported that the disk (or the page limit) is full."""


class FailureKind(enum.StrEnum):
    """Why a URL could not be checked; recorded in ``result.error_kind``."""

    TIMEOUT = "timeout"
    CONNECTION = "connection"
    DNS = "dns"
    TLS = "tls"
    REDIRECT_LOOP = "redirect_loop"
    TOO_MANY_REDIRECTS = "too_many_redirects"
    INVALID_RESPONSE = "invalid_response"
    BODY_TOO_LARGE = "body_too_large"
    HTTP_STATUS = "http_status"
    INVALID_URL = "invalid_url"
    PRIVATE_ADDRESS = "private_address"  # refused under --exclude-all-private
