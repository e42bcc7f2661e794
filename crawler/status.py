"""Status policy: which HTTP statuses count as fine, and what looks like a bot wall.

``--accept`` uses lychee's range syntax: ``200..=299, 403`` (``a..b`` excludes
``b``, ``a..=b`` includes it). A bot wall is not a broken link: Cloudflare's
challenge (``cf-mitigated: challenge``), LinkedIn's 999, and a 403 from a
server known to put one up are classed *blocked* and reported apart.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

_RANGE = re.compile(r"^\s*(\d{3})?\s*\.\.(=?)\s*(\d{3})?\s*$")
BOT_WALL_SERVERS = ("cloudflare", "akamaighost", "ddos-guard", "sucuri")
BOT_WALL_STATUSES = frozenset({999})


def parse_accept(entries: Iterable[str]) -> frozenset[int]:
    """The set of accepted statuses; ValueError naming the bad part."""
    accepted: set[int] = set()
    for entry in entries:
        for part in entry.split(","):
            part = part.strip()
            if not part:
                continue
            if part.isdigit():
                accepted.add(_status(int(part), part))
                continue
            match = _RANGE.match(part)
            if not match or not (match.group(1) or match.group(3)):
                raise ValueError(f"invalid status range {part!r} (use e.g. 200..=299, 403)")
            low = _status(int(match.group(1)), part) if match.group(1) else 100
            high = _status(int(match.group(3)), part) if match.group(3) else 1000
            inclusive = match.group(2) == "=" or not match.group(3)
            accepted.update(range(low, high + 1 if inclusive else high))
    return frozenset(accepted)


def _status(code: int, part: str) -> int:
    if not 100 <= code <= 999:
        raise ValueError(f"invalid status {code} in {part!r}")
    return code


def is_bot_wall(status: int | None, headers: Mapping[str, str]) -> bool:
    """Does this response look like a bot wall rather than a broken link?"""
    if status in BOT_WALL_STATUSES:
        return True
    if headers.get("cf-mitigated", "").lower() == "challenge":
        return True
    if status in (403, 429, 503):
        server = headers.get("server", "").lower()
        return status == 403 and any(name in server for name in BOT_WALL_SERVERS)
    return False
