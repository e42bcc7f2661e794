"""Per-host statistics and exclusion reasons of one crawl: the queries and their records.

Both backends run the same standard SQL over the documented ``url_result``
view (``{p}`` is their placeholder for the crawl id), so the service shows the
same numbers on SQLite and PostgreSQL. ``requests`` counts URLs requested
(retries and confirming GETs aside); a failure is no HTTP answer or a 5xx, as
in the ``crawler_host_errors_total`` metric. Exclusion reasons are grouped
into a few kinds by ``reason_of``: the stored texts name hosts or schemes.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from crawler import urls
from crawler.errors import InvalidURLError

MAX_HOSTS = 1000  # the busiest hosts; a crawl checking more links elsewhere shows these

HOST_STATS_SQL = f"""
SELECT host,
       count(*),
       sum(CASE WHEN status >= 500
                  OR (error_kind IS NOT NULL AND error_kind <> 'http_status') THEN 1 ELSE 0 END),
       sum(CASE WHEN status BETWEEN 200 AND 299 THEN 1 ELSE 0 END),
       sum(CASE WHEN status BETWEEN 300 AND 399 THEN 1 ELSE 0 END),
       sum(CASE WHEN status BETWEEN 400 AND 499 THEN 1 ELSE 0 END),
       sum(CASE WHEN status >= 500 THEN 1 ELSE 0 END),
       sum(CASE WHEN status IS NULL THEN 1 ELSE 0 END),
       avg(elapsed_ms)
FROM url_result
WHERE crawl_id = {{p}} AND host IS NOT NULL AND class IN ('ok', 'redirected', 'broken', 'blocked')
GROUP BY host
ORDER BY count(*) DESC, host
LIMIT {MAX_HOSTS}
"""
EXCLUSIONS_SQL = """
SELECT class, error_kind, error, count(*)
FROM url_result
WHERE crawl_id = {p} AND class IN ('skipped', 'excluded')
GROUP BY class, error_kind, error
UNION ALL
SELECT 'checked', NULL, NULL, n
FROM (SELECT count(*) AS n FROM url_result
      WHERE crawl_id = {p} AND kind = 'check' AND state = 'done' AND class <> 'skipped') c
WHERE n > 0
"""
# Requested to learn their status, never parsed for links.
CHECKED_ONLY = "checked, not crawled (another host, a resource, or past max_depth)"
# Seeds (and sitemap pages: depth 0 too) the private-address guard refused
# (broken since this version: outcome.build_outcome; excluded before).
REFUSED_SQL = """
SELECT url, error FROM url_result
WHERE crawl_id = {p} AND depth = 0 AND class IN ('broken', 'excluded')
  AND error_kind = 'private_address'
ORDER BY url
LIMIT 100
"""


@dataclass(frozen=True, slots=True)
class HostStats:
    """What the crawl asked one host, and how it answered."""

    host: str
    requests: int
    failures: int
    status_2xx: int
    status_3xx: int
    status_4xx: int
    status_5xx: int
    no_response: int
    mean_latency_ms: float | None


@dataclass(frozen=True, slots=True)
class Exclusion:
    """Why some URLs were recorded but not requested, and how many."""

    reason: str
    count: int


@dataclass(frozen=True, slots=True)
class CrawlStats:
    hosts: list[HostStats] = field(default_factory=list)
    exclusions: list[Exclusion] = field(default_factory=list)
    refused: list[tuple[str, str | None]] = field(default_factory=list)  # depth-0 private


def reason_of(result_class: str, error_kind: str | None, error: str | None) -> str:
    """The kind of reason a URL was not requested (a few values, not the stored text)."""
    text = error or ""
    if result_class == "checked":
        return CHECKED_ONLY
    if error_kind == "private_address" or text.startswith("private address"):
        return "private address"
    if text == "excluded by filter":
        return "excluded pattern"
    if text.startswith("out of scope"):
        return "out of scope (internal_only)"
    if text == "disallowed by robots.txt":
        return "disallowed by robots.txt"
    if text.startswith("unsupported scheme"):
        return "not http(s) (mailto:, tel:, ...)"
    return text or result_class


def host_stats(rows: Iterable[Sequence[Any]]) -> list[HostStats]:
    """From ``HOST_STATS_SQL``'s rows."""
    found = []
    for host, requests, failures, s2, s3, s4, s5, none, mean in rows:
        found.append(
            HostStats(
                host=str(host),
                requests=int(requests or 0),
                failures=int(failures or 0),
                status_2xx=int(s2 or 0),
                status_3xx=int(s3 or 0),
                status_4xx=int(s4 or 0),
                status_5xx=int(s5 or 0),
                no_response=int(none or 0),
                mean_latency_ms=None if mean is None else round(float(mean), 1),
            )
        )
    return found


def exclusions(rows: Iterable[Sequence[Any]]) -> list[Exclusion]:
    """From ``EXCLUSIONS_SQL``'s rows: counts per kind of reason, most first."""
    counts: Counter[str] = Counter()
    for result_class, error_kind, error, count in rows:
        counts[reason_of(str(result_class), error_kind, error)] += int(count or 0)
    return [Exclusion(reason, n) for reason, n in counts.most_common()]


def refused_seeds(stats: CrawlStats, seeds: Iterable[str]) -> list[tuple[str, str | None]]:
    """The refused depth-0 URLs that are the crawl's seeds (not its sitemaps' pages)."""
    keys = set()
    for seed in seeds:
        with contextlib.suppress(InvalidURLError):
            keys.add(urls.normalize(seed)[0])
    return [(url, error) for url, error in stats.refused if url in keys]
