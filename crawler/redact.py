"""Credentials in URLs (``https://user:pass@host/``), hidden wherever a URL is shown.

A seed with credentials in it is a way to check a protected site; the
credentials must not then appear in the API, the reports, the dashboard or
the logs. The whole user-info part is replaced (a user name alone is often a
token: ``https://TOKEN@github.com``). The stored URL keeps them: the crawl
needs them to make its requests.
"""

from __future__ import annotations

import re
from collections.abc import MutableMapping
from typing import Any

HIDDEN = "***"
# After "://", up to "@", without crossing into the path, query or fragment,
# nor out of a quoted string or a tag in a rendered report.
_USERINFO = re.compile(r"(?<=://)[^/?#@\s\"'<>\\]+@")


def credentials(text: str) -> str:
    """``text`` with the user-info of every URL in it replaced by ``***``."""
    if "@" not in text:
        return text
    return _USERINFO.sub(HIDDEN + "@", text)


def values(value: Any) -> Any:
    """``credentials`` applied to every string in a JSON-like value."""
    if isinstance(value, str):
        return credentials(value)
    if isinstance(value, list | tuple):
        return type(value)(values(item) for item in value)
    if isinstance(value, dict):
        return {key: values(item) for key, item in value.items()}
    return value


def log_processor(logger: Any, method: str, event: MutableMapping[str, Any]) -> Any:
    """A structlog processor: no credentials in a log line."""
    for key, value in event.items():
        if isinstance(value, str) and "@" in value:
            event[key] = credentials(value)
    return event
