"""The service's memory budget: how much its crawls may hold, and what follows from it.

The container files ship a memory limit (512 MiB in ``docker-compose.yml``
and ``deploy/kubernetes``); the service must stay under it whatever sites it
crawls. ``--memory-budget`` (default: that limit, or the cgroup's own limit
when lower) is shared by all running crawls and sizes, through ``plan``:

- the fixed part: the service process itself, and one parse helper process
  per running crawl (pages are parsed there, off the event loop) with the
  largest page it may have to parse;
- the body cap and the links-per-page cap of each crawl (a crawl may ask for
  less, never more): halved until the fixed part and a few pages fit;
- the page budget (``ByteBudget``), what the crawls' pages in flight may hold
  at once in the service process; each page reserves its worst case before
  it is fetched (``PageCost``).

The constants are measured (``bench/service_memory.py``); the margin covers
allocator slack and what is not modelled (sockets, the SQLite caches).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from crawler.config import DEFAULT_MAX_BODY_BYTES
from crawler.page_cost import PageCost

MIB = 1 << 20
# The limit docker-compose.yml (mem_limit) and deploy/kubernetes (limits.memory) ship.
SHIPPED_LIMIT_BYTES = 512 * MIB
DEFAULT_MEMORY_BUDGET_BYTES = SHIPPED_LIMIT_BYTES
MIN_MEMORY_BUDGET_BYTES = 192 * MIB
MARGIN = 0.15  # of the budget, kept free
SERVICE_BASE_BYTES = 100 * MIB  # the service process with its crawls' databases open
HELPER_BASE_BYTES = 30 * MIB  # a parse helper, idle
HELPER_BODY_FACTOR = 4  # a parse: the body, its text, the tokenizer's copies
HELPER_LINK_BYTES = 900  # a parse: each link as found, resolved, classified and pickled
DEFAULT_MAX_LINKS_PER_PAGE = 50_000
MIN_BODY_BYTES = 256 * 1024
MIN_LINKS_PER_PAGE = 2_000
MIN_PAGES_AT_ONCE = 2  # worst-case pages in flight the plan leaves room for
CGROUP_MEMORY_MAX = Path("/sys/fs/cgroup/memory.max")
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmg]i?b?|b)?\s*$", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class MemoryPlan:
    """What a budget allows; see the module docstring."""

    budget_bytes: int
    max_running: int
    max_body_bytes: int
    max_links_per_page: int
    helpers_per_crawl: int
    fixed_bytes: int
    page_budget_bytes: int

    @property
    def page_cost(self) -> PageCost:
        return PageCost(self.max_body_bytes, self.max_links_per_page)


def helper_bytes(max_body_bytes: int, max_links: int) -> int:
    """A parse helper at its peak: idle size plus the largest page it may parse."""
    return HELPER_BASE_BYTES + max_body_bytes * HELPER_BODY_FACTOR + max_links * HELPER_LINK_BYTES


def plan(budget_bytes: int, max_running: int) -> MemoryPlan:
    """Caps and the page budget for ``max_running`` crawls within ``budget_bytes``."""
    usable = int(budget_bytes * (1 - MARGIN))
    body, links = DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_LINKS_PER_PAGE
    while True:
        fixed = SERVICE_BASE_BYTES + max_running * helper_bytes(body, links)
        pages = usable - fixed
        if pages >= MIN_PAGES_AT_ONCE * PageCost(body, links).worst():
            break
        if body <= MIN_BODY_BYTES and links <= MIN_LINKS_PER_PAGE:
            break  # the floor: a budget this small is refused by check_budget
        body, links = max(body // 2, MIN_BODY_BYTES), max(links // 2, MIN_LINKS_PER_PAGE)
    return MemoryPlan(
        budget_bytes=budget_bytes,
        max_running=max_running,
        max_body_bytes=body,
        max_links_per_page=links,
        helpers_per_crawl=1,
        fixed_bytes=fixed,
        page_budget_bytes=max(pages, PageCost(body, links).worst()),
    )


def check_budget(budget_bytes: int, max_running: int) -> None:
    """ValueError when the budget cannot hold ``max_running`` crawls at the smallest caps."""
    smallest = plan(budget_bytes, max_running)
    needed = smallest.fixed_bytes + MIN_PAGES_AT_ONCE * smallest.page_cost.worst()
    if needed > budget_bytes * (1 - MARGIN):
        raise ValueError(
            f"{budget_bytes // MIB} MiB cannot hold {max_running} running crawls "
            f"(about {int(needed / (1 - MARGIN)) // MIB + 1} MiB needed): "
            "raise it or lower --max-running"
        )


def default_budget(cgroup_file: Path = CGROUP_MEMORY_MAX) -> int:
    """The shipped limit, or the container's own limit when it is lower."""
    try:
        text = cgroup_file.read_text(encoding="ascii").strip()
    except OSError:
        return DEFAULT_MEMORY_BUDGET_BYTES
    if not text.isdigit():  # "max": no limit
        return DEFAULT_MEMORY_BUDGET_BYTES
    return min(int(text), DEFAULT_MEMORY_BUDGET_BYTES)


def parse_size(text: str) -> int:
    """``512M``, ``512MiB``, ``1G``, ``1.5g``, ``536870912`` -> bytes (binary units)."""
    match = _SIZE.match(text)
    if match is None:
        raise ValueError(f"expected a size such as 512M or 1G, got {text!r}")
    number, unit = float(match.group(1)), (match.group(2) or "b").lower()[:1]
    return int(number * {"b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[unit])
