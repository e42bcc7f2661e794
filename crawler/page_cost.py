"""What a page costs the crawling process in bytes: pure arithmetic, no I/O.

Kept in the core (not beside ``engine.membudget``'s semaphore) so the service's
settings can size a budget without importing the engine and asyncio at start-up.
"""

from __future__ import annotations

from dataclasses import dataclass

# What a page costs the crawling process, per byte of body and per link found
# (measured: bench/service_memory.py, README "Memory"): the body read in chunks
# and joined, its frame to the parse helper; each link as a frontier row.
BODY_FACTOR = 3
LINK_BYTES = 350
# The fewest bytes of HTML a link takes (`<a href=x>`): a body of N bytes holds
# at most N / MIN_LINK_BYTES links.
MIN_LINK_BYTES = 11


@dataclass(frozen=True, slots=True)
class PageCost:
    """Bytes a page holds in the crawling process, before and after its body is known."""

    max_body_bytes: int
    max_links: int | None

    def worst(self) -> int:
        """Before the fetch: the largest body with the most links."""
        return self.after_fetch(self.max_body_bytes)

    def after_fetch(self, body_bytes: int) -> int:
        links = body_bytes // MIN_LINK_BYTES
        if self.max_links is not None:
            links = min(links, self.max_links)
        return body_bytes * BODY_FACTOR + links * LINK_BYTES

    @staticmethod
    def after_parse(links: int) -> int:
        """Once parsed: the body is gone, the links wait for their commit."""
        return links * LINK_BYTES
