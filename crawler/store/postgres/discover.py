"""Recording found URLs on PostgreSQL: dedup, kind upgrade and limits, a batch at a time.

``Recorder.record`` is the batched form of the SQLite frontier's ``_upsert``
loop, with the same outcome row for row:

- a URL is new when ``INSERT … ON CONFLICT (crawl_id, url) DO NOTHING`` adds
  it; its first finding decides depth and hop;
- a URL found again with a stronger kind (check < anchors < page) is
  upgraded by a separate ``UPDATE`` (so an upgrade never counts as new),
  taking the smaller depth and going back to pending if it was done; a
  skipped URL stays skipped;
- past ``--max-urls`` nothing new is added and nothing is upgraded, but links
  to URLs already known are still recorded;
- with ``--max-cache-age`` a new link to check takes a recent OK result of an
  earlier crawl instead of being requested again.

Each URL comes back with whether it is settled (a page crawled with an OK
result), so a link to it can go to ``link_settled``, which reports never read.

The one difference from URL-at-a-time: a URL first found as a link to check
and later in the same batch as a page is inserted as a page at once (SQLite
inserts it as a check, may fill it from the cache, then upgrades it). Either
way it ends up fetched as a page.

Statements lock rows in a fixed order (URLs sorted) to keep concurrent
workers from deadlocking; when PostgreSQL still aborts one, the caller's
transaction runs again (``schema.in_transaction``) after ``forget``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from crawler.models import Discovered, UrlKind, UrlState
from crawler.store import url_cache
from crawler.store.postgres import arrays

DEFAULT_SEEN_CACHE_SIZE = 120_000  # URLs remembered, as on SQLite (crawler.store.url_cache)
HOST_CACHE_SIZE = 20_000
EARLIER_CRAWLS = 20  # --max-cache-age looks this many crawls back, as on SQLite
_COUNT_LOCK = 0x43524C58  # with the crawl id: serializes inserts under --max-urls

_INSERT = """
INSERT INTO url (crawl_id, url, host_id, kind, depth, hop, state)
SELECT $1, x.url, x.host_id, x.kind, x.depth, x.hop, x.state
FROM unnest($2::text::text[], $3::text::bigint[], $4::text::smallint[], $5::text::integer[],
            $6::text::integer[], $7::text::smallint[]) AS x (url, host_id, kind, depth, hop, state)
ORDER BY x.url
ON CONFLICT (crawl_id, url) DO NOTHING
RETURNING id, url
"""

_UPGRADE = """
UPDATE url SET kind = x.kind, depth = LEAST(url.depth, x.depth),
    state = CASE WHEN url.state = 2 THEN 0 ELSE url.state END
FROM unnest($1::bigint[], $2::smallint[], $3::integer[]) AS x (id, kind, depth)
WHERE url.id = x.id AND url.kind >= 1 AND url.kind < x.kind
"""

_REUSE = f"""
WITH wanted AS (
    SELECT * FROM unnest($1::bigint[], $2::text[]) AS w (id, url)
),
earlier AS (
    SELECT id FROM crawl WHERE id <> $3 ORDER BY id DESC LIMIT {EARLIER_CRAWLS}
),
best AS (
    SELECT DISTINCT ON (w.id)
           w.id, r.status, r.content_type, r.bytes, r.elapsed_ms, r.checked_at
    FROM wanted w
    JOIN url p    ON p.url = w.url AND p.crawl_id IN (SELECT id FROM earlier)
    JOIN result r ON r.url_id = p.id
    WHERE r.class = 'ok' AND r.checked_at >= $4
    ORDER BY w.id, r.checked_at DESC
),
done AS (
    UPDATE url SET state = 2 FROM best WHERE url.id = best.id RETURNING url.id
)
INSERT INTO result (url_id, class, status, content_type, bytes, elapsed_ms, checked_at)
SELECT id, 'ok', status, content_type, bytes, elapsed_ms, checked_at FROM best
"""

# Results are replaced, as SQLite's INSERT OR REPLACE does (a URL checked again).
UPSERT_RESULTS = """
INSERT INTO result (url_id, class, status, error_kind, error, redirect_to_id,
                    content_type, bytes, elapsed_ms, checked_at, head_status)
SELECT * FROM unnest($1::text::bigint[], $2::text::text[], $3::text::integer[],
                     $4::text::text[], $5::text::text[], $6::text::bigint[], $7::text::text[],
                     $8::text::bigint[], $9::text::integer[], $10::text::double precision[],
                     $11::text::integer[])
ORDER BY 1
ON CONFLICT (url_id) DO UPDATE SET
    class = excluded.class, status = excluded.status, error_kind = excluded.error_kind,
    error = excluded.error, redirect_to_id = excluded.redirect_to_id,
    content_type = excluded.content_type, bytes = excluded.bytes,
    elapsed_ms = excluded.elapsed_ms, checked_at = excluded.checked_at,
    head_status = excluded.head_status
"""

ResultRow = tuple[
    int,
    str,
    int | None,
    str | None,
    str | None,
    int | None,
    str | None,
    int | None,
    int | None,
    float,
    int | None,
]
# ``UPSERT_RESULTS``' text columns (class, error kind, error, content type): the rest are numbers.
RESULT_TEXT_COLUMNS = frozenset({1, 3, 4, 6})


class Found(NamedTuple):
    """A URL to record, with where it was found: depth and redirect hop.

    A named tuple, as ``Discovered``: one is built per link of every page
    completed, and a frozen dataclass's ``__init__`` costs several times more.
    """

    item: Discovered
    depth: int
    hop: int


@dataclass(slots=True)
class _Planned:
    """What the batch will leave in a URL's row."""

    id: int | None  # None until inserted
    kind: int
    settled: bool
    depth: int
    hop: int
    state: int
    first: Discovered  # the first finding of a new URL
    is_new: bool
    upgraded: bool = False


class Recorder:
    """Inserts and finds URL rows of one crawl; caches only what cannot go stale."""

    def __init__(
        self,
        crawl_id: int,
        *,
        max_urls: int | None = None,
        max_cache_age_s: float | None = None,
        seen_cache_size: int = DEFAULT_SEEN_CACHE_SIZE,
    ) -> None:
        self.crawl_id = crawl_id
        self._max_urls = max_urls
        self._max_cache_age_s = max_cache_age_s
        # An entry stays true whatever other workers do (a row settled since
        # is only a link kept open): crawler.store.url_cache.
        self._seen = url_cache.UrlCache(seen_cache_size)
        self._host_ids: OrderedDict[str, int] = OrderedDict()

    def forget(self) -> None:
        """After a rollback the caches may name rows and hosts that do not exist."""
        self._seen.clear()
        self._host_ids.clear()

    async def record(
        self, conn: Any, found: Sequence[Found], now: float, results: list[ResultRow]
    ) -> tuple[list[int | None], list[bool], int]:
        """Insert or find each URL: row ids in order (None past --max-urls), settled, new count.

        Result rows for new skipped URLs are appended to ``results``.
        """
        ids: list[int | None] = [None] * len(found)
        settled = [False] * len(found)
        todo: list[int] = []
        seen_get = self._seen.get
        for i, (item, _, _) in enumerate(found):
            cached = seen_get(item.url)
            if cached is not None and url_cache.kind_of(cached) >= item.kind:
                ids[i], settled[i] = url_cache.row_id(cached), url_cache.is_settled(cached)
            else:
                todo.append(i)
        if not todo:
            return ids, settled, 0
        count: int | None = None
        if self._max_urls is not None:
            await conn.execute("SELECT pg_advisory_xact_lock($1, $2)", _COUNT_LOCK, self.crawl_id)
            count = int(
                await conn.fetchval("SELECT count(*) FROM url WHERE crawl_id = $1", self.crawl_id)
            )
        urls = sorted({found[i].item.url for i in todo})
        existing = await conn.fetch(
            "SELECT url, id, kind, settled, depth, hop, state FROM url "
            "WHERE crawl_id = $1 AND url = ANY($2::text[])",
            self.crawl_id,
            urls,
        )
        plan: dict[str, _Planned] = {
            r[0]: _Planned(r[1], r[2], r[3], r[4], r[5], r[6], found[todo[0]].item, is_new=False)
            for r in existing
        }
        wanted: list[tuple[int, str]] = []  # (index into found, url) that get an id
        for i in todo:
            f = found[i]
            row = plan.get(f.item.url)
            if self._max_urls is not None and count is not None and count >= self._max_urls:
                if row is not None:
                    wanted.append((i, f.item.url))
                continue
            if row is None:
                state = UrlState.DONE if f.item.kind == UrlKind.SKIP else UrlState.PENDING
                plan[f.item.url] = _Planned(
                    None, int(f.item.kind), False, f.depth, f.hop, int(state), f.item, is_new=True
                )
                if count is not None:
                    count += 1
            elif row.kind >= UrlKind.CHECK and f.item.kind > row.kind:
                row.kind = int(f.item.kind)
                row.depth = min(row.depth, f.depth)
                row.upgraded = not row.is_new
            wanted.append((i, f.item.url))
        new = await self._insert(conn, plan, now, results)
        await self._upgrade(conn, plan)
        for i, url in wanted:
            row = plan[url]
            assert row.id is not None
            ids[i], settled[i] = row.id, row.settled
            entry = url_cache.pack(row.id, row.kind, row.settled)
            if row.is_new:
                self._seen.put_new(url, entry)
            else:
                self._seen.put(url, entry)
        return ids, settled, new

    def settle(self, url: str) -> None:
        """``url`` was just crawled OK as a page: links to it are settled from now on."""
        self._seen.settle(url)

    async def _insert(
        self, conn: Any, plan: dict[str, _Planned], now: float, results: list[ResultRow]
    ) -> int:
        fresh = sorted((url, row) for url, row in plan.items() if row.is_new)
        if not fresh:
            return 0
        hosts = await self._hosts(conn, {row.first.host for _, row in fresh if row.first.host})
        inserted = await conn.fetch(
            _INSERT,
            self.crawl_id,
            arrays.texts([url for url, _ in fresh]),
            arrays.numbers([hosts[row.first.host] if row.first.host else None for _, row in fresh]),
            arrays.numbers([int(row.kind) for _, row in fresh]),
            arrays.numbers([row.depth for _, row in fresh]),
            arrays.numbers([row.hop for _, row in fresh]),
            arrays.numbers([int(row.state) for _, row in fresh]),
        )
        for url_id, url in inserted:
            plan[url].id = int(url_id)
        raced = [url for url, row in fresh if row.id is None]
        if raced:  # inserted meanwhile by another worker: found again, maybe an upgrade
            for url, url_id, kind, settled in await conn.fetch(
                "SELECT url, id, kind, settled FROM url "
                "WHERE crawl_id = $1 AND url = ANY($2::text[])",
                self.crawl_id,
                raced,
            ):
                row = plan[url]
                row.id, row.is_new, row.settled = int(url_id), False, settled
                row.upgraded = kind >= UrlKind.CHECK and row.kind > kind
                row.kind = max(row.kind, int(kind)) if kind >= UrlKind.CHECK else int(kind)
        for _, row in fresh:
            if row.is_new and row.kind == UrlKind.SKIP:
                assert row.id is not None
                item = row.first
                result = None if item.result is None else str(item.result)
                results.append(
                    (
                        row.id,
                        result or "skipped",
                        None,
                        None,
                        item.reason,
                        None,
                        None,
                        None,
                        None,
                        now,
                        None,
                    )
                )
        if self._max_cache_age_s is not None:
            checks = [(row.id, url) for url, row in fresh if row.is_new and row.kind == 1]
            if checks:
                await conn.execute(
                    _REUSE,
                    [c[0] for c in checks],
                    [c[1] for c in checks],
                    self.crawl_id,
                    now - self._max_cache_age_s,
                )
        return sum(1 for _, row in fresh if row.is_new)

    async def _upgrade(self, conn: Any, plan: dict[str, _Planned]) -> None:
        ups = sorted((row.id, row.kind, row.depth) for row in plan.values() if row.upgraded)
        if ups:
            await conn.execute(
                _UPGRADE, [u[0] for u in ups], [u[1] for u in ups], [u[2] for u in ups]
            )

    async def _hosts(self, conn: Any, names: set[str]) -> dict[str, int]:
        """Host ids by name, inserting the hosts not seen before."""
        found = {name: self._host_ids[name] for name in names if name in self._host_ids}
        missing = sorted(names - found.keys())
        if missing:
            await conn.execute(
                "INSERT INTO host (name) SELECT unnest($1::text[]) ORDER BY 1 "
                "ON CONFLICT (name) DO NOTHING",
                missing,
            )
            for host_id, name in await conn.fetch(
                "SELECT id, name FROM host WHERE name = ANY($1::text[])", missing
            ):
                found[name] = self._host_ids[name] = int(host_id)
            while len(self._host_ids) > HOST_CACHE_SIZE:
                self._host_ids.popitem(last=False)
        return found
