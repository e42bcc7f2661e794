"""Prometheus metrics of the service, on its own ``CollectorRegistry``.

Counters move by deltas: the crawl manager samples each running crawl (engine
counters, and per-host totals from the crawl's database) and adds what changed
since the last sample, so a counter never goes down when a crawl stops or is
deleted. Gauges are read when scraped.

Host labels are bounded: the first ``max_hosts`` hosts seen get their own
label, every later one is counted under ``other``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from crawler.service.config import MAX_HOST_LABELS

OTHER_HOST = "other"
CONTENT_TYPE = CONTENT_TYPE_LATEST


class HostLabels:
    """Host -> label, with at most ``limit`` distinct hosts plus ``other``."""

    def __init__(self, limit: int = MAX_HOST_LABELS) -> None:
        self._limit = limit
        self._known: set[str] = set()

    def __call__(self, host: str) -> str:
        if host in self._known:
            return host
        if len(self._known) < self._limit:
            self._known.add(host)
            return host
        return OTHER_HOST


class ServiceMetrics:
    """Everything ``/metrics`` shows."""

    def __init__(self, max_hosts: int = MAX_HOST_LABELS) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.pages = Counter("crawler_pages_crawled", "Pages fetched and parsed", registry=r)
        self.links = Counter("crawler_links_checked", "URLs checked (pages included)", registry=r)
        self.broken = Counter("crawler_broken", "URLs found broken", registry=r)
        self.host_requests = Counter(
            "crawler_host_requests",
            "URLs requested per host (one per URL done; retries not counted)",
            ["host"],
            registry=r,
        )
        self.host_errors = Counter(
            "crawler_host_errors",
            "URLs per host that got no response or a 5xx",
            ["host"],
            registry=r,
        )
        self.lease_expiries = Counter(
            "crawler_lease_expiries",
            "Leases found held by a dead or expired worker when a crawl (re)started",
            registry=r,
        )
        self.in_flight = Gauge("crawler_requests_in_flight", "Requests in flight", registry=r)
        self.frontier = Gauge(
            "crawler_frontier_urls", "URLs in running crawls' frontiers", ["state"], registry=r
        )
        self.crawls = Gauge("crawler_crawls", "Crawls by state", ["state"], registry=r)
        self.http = Counter(
            "crawler_service_http_requests",
            "API requests answered",
            ["method", "route", "status"],
            registry=r,
        )
        self.host_label = HostLabels(max_hosts)

    def add_host_totals(self, deltas: dict[str, tuple[int, int]]) -> None:
        for host, (requests, errors) in deltas.items():
            label = self.host_label(host)
            if requests > 0:
                self.host_requests.labels(host=label).inc(requests)
            if errors > 0:
                self.host_errors.labels(host=label).inc(errors)

    def watch_states(self, states: tuple[str, ...], count: Callable[[str], int]) -> None:
        """Crawl-state gauges computed at scrape time."""
        for state in states:
            self.crawls.labels(state=state).set_function(functools.partial(count, state))

    def render(self) -> bytes:
        return generate_latest(self.registry)


def host_deltas(
    before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]
) -> dict[str, tuple[int, int]]:
    """What grew between two per-host totals of one crawl (never negative)."""
    deltas = {}
    for host, (requests, errors) in after.items():
        old_requests, old_errors = before.get(host, (0, 0))
        grown = (max(requests - old_requests, 0), max(errors - old_errors, 0))
        if grown != (0, 0):
            deltas[host] = grown
    return deltas
