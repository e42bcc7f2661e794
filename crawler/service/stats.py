"""``GET /crawls/{crawl_id}/stats``: what the crawl asked each host, and what it left out.

Per host: URLs requested, failures (no answer or a 5xx), answers by status
class, mean latency. Exclusions: URLs recorded but never requested, counted
by kind of reason (an exclude pattern, robots.txt, a private address, not
http(s), out of scope with ``internal_only``). ``refused_seeds``: seeds the
private-address guard refused, so a crawl that could not start is never
mistaken for a clean one. Read through the ``ServiceStore``, either backend.
"""

from __future__ import annotations

from aiohttp import web
from pydantic import BaseModel, Field

from crawler import redact
from crawler.service.handlers import crawl_id_of, entry_of
from crawler.service.state import SERVICE, ApiError
from crawler.store import crawl_stats as crawl_stats_store
from crawler.store.crawl_stats import CrawlStats


class HostStatsView(BaseModel):
    host: str
    requests: int = Field(description="URLs requested (retries and confirming GETs aside)")
    failures: int = Field(description="no HTTP answer (timeout, refused, DNS, TLS…) or a 5xx")
    status_2xx: int
    status_3xx: int
    status_4xx: int
    status_5xx: int
    no_response: int = Field(description="requests that got no HTTP answer")
    mean_latency_ms: float | None = Field(description="mean time to the answer")


class ExclusionView(BaseModel):
    reason: str = Field(
        description="excluded pattern, disallowed by robots.txt, private address, "
        "not http(s) (mailto:, tel:, ...), out of scope (internal_only); and the URLs "
        "checked but not crawled (another host, a resource, or past max_depth)"
    )
    count: int


class RefusedSeed(BaseModel):
    url: str
    error: str | None


class CrawlStatsView(BaseModel):
    """Body of ``GET /crawls/{crawl_id}/stats``."""

    crawl_id: int
    hosts: list[HostStatsView] = Field(description="the busiest 1,000 hosts, most requests first")
    exclusions: list[ExclusionView] = Field(
        description="URLs not requested, and those not crawled, by reason"
    )
    refused_seeds: list[RefusedSeed] = Field(
        description="seeds the private-address guard refused (the crawl could not start there)"
    )


def refused_seeds(stats: CrawlStats, seeds: list[str]) -> list[RefusedSeed]:
    return [
        RefusedSeed(url=redact.credentials(url), error=error)
        for url, error in crawl_stats_store.refused_seeds(stats, seeds)
    ]


async def crawl_stats(request: web.Request) -> web.Response:
    service = request.app[SERVICE]
    entry = entry_of(service, crawl_id_of(request))
    stats = await service.manager.store.crawl_stats(entry.id)
    if stats is None:
        raise ApiError(409, f"crawl {entry.id} has not started yet; no statistics")
    view = CrawlStatsView(
        crawl_id=entry.id,
        hosts=[HostStatsView.model_validate(h, from_attributes=True) for h in stats.hosts],
        exclusions=[
            ExclusionView.model_validate(e, from_attributes=True) for e in stats.exclusions
        ],
        refused_seeds=refused_seeds(stats, entry.seeds),
    )
    return web.json_response(view.model_dump(mode="json"))
