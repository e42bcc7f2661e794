-- New open links are appended, and moved into the target-keyed table in batches.
--
-- Every completion used to insert its open links (links to URLs not yet
-- settled) straight into link_open, keyed by target: ~20 random B-tree pages
-- per crawled page, each written to the WAL at every commit and again at
-- every checkpoint. That was 72% of the WAL frames of a 10,000-page crawl
-- (48 KB written per page; ~150 KB per page at 1,000,000 pages). Now a
-- completion appends them to link_fresh (a rowid table without index: a few
-- pages per commit), and the writer moves
-- link_fresh into link_open sorted by target once it holds as many rows as
-- the crawl has URLs (at least 200,000; ``crawler.store.sqlite.links``): each
-- link_open page is then rewritten once per batch, not once per link.
--
-- Readers see both: every view that read link_open reads link_fresh too, and
-- the `link` view is every link, whichever table holds it. A link may sit in
-- link_fresh twice (a page completed again) until the batch moves it.
--
-- A re-crawl reads the previous crawl's links by source from link_open
-- (0012's index): its store moves link_fresh into link_open first
-- (Frontier.previous_crawl). An index by source here cost 15% more bytes
-- written per page (12,950 B against 11,298 B, 10,000-page bench site).
--
-- The views keep what 0015 (positions: `line` and `col`, decoded from the
-- packed `at`) and 0014 (rendered_links reads `link`) defined.
CREATE TABLE link_fresh (
    target_id  INTEGER NOT NULL,
    source_id  INTEGER NOT NULL,
    fragment   TEXT    NOT NULL DEFAULT '',
    element    TEXT    NOT NULL,
    at         INTEGER              -- line and column, packed as in link_open (0015)
);

DROP VIEW link;
CREATE VIEW link AS
SELECT target_id, source_id, fragment, element,
       CASE WHEN at >= 0 THEN at >> 10 ELSE (-at) >> 32 END AS line,
       CASE WHEN at >= 0 THEN at & 1023 ELSE (-at) & 4294967295 END AS col
FROM link_open
UNION ALL
SELECT target_id, source_id, fragment, element,
       CASE WHEN at >= 0 THEN at >> 10 ELSE (-at) >> 32 END AS line,
       CASE WHEN at >= 0 THEN at & 1023 ELSE (-at) & 4294967295 END AS col
FROM link_fresh
UNION ALL
SELECT target_id, source_id, fragment, element,
       CASE WHEN at >= 0 THEN at >> 10 ELSE (-at) >> 32 END AS line,
       CASE WHEN at >= 0 THEN at & 1023 ELSE (-at) & 4294967295 END AS col
FROM link_settled;

-- Same rows as before (0015): one per (broken URL, source) with where the
-- source writes it; a broken seed without sources has one row with no source.
DROP VIEW broken_links;
CREATE VIEW broken_links AS
WITH bad AS MATERIALIZED (
    SELECT rv.crawl_id, rv.url_id, rv.url, rv.status, rv.error, rv.depth, rv.hop
    FROM (SELECT url_id FROM result WHERE class = 'broken'
          UNION
          SELECT url_id FROM result WHERE redirect_to_id IS NOT NULL) candidate
    JOIN resolved rv ON rv.url_id = candidate.url_id
    WHERE rv.class = 'broken'
)
SELECT b.crawl_id, b.url, b.status, b.error, s.url AS source, l.element, l.fragment,
       CASE WHEN l.at >= 0 THEN l.at >> 10 ELSE (-l.at) >> 32 END AS line,
       CASE WHEN l.at >= 0 THEN l.at & 1023 ELSE (-l.at) & 4294967295 END AS col
FROM bad b
JOIN link_open l ON l.target_id = b.url_id AND l.element <> 'redirect'
JOIN url s       ON s.id = l.source_id
UNION ALL
SELECT b.crawl_id, b.url, b.status, b.error, s.url AS source, l.element, l.fragment,
       CASE WHEN l.at >= 0 THEN l.at >> 10 ELSE (-l.at) >> 32 END AS line,
       CASE WHEN l.at >= 0 THEN l.at & 1023 ELSE (-l.at) & 4294967295 END AS col
FROM link_fresh l
JOIN bad b ON b.url_id = l.target_id
JOIN url s ON s.id = l.source_id
WHERE l.element <> 'redirect'
UNION ALL
SELECT b.crawl_id, b.url, b.status, b.error, NULL, NULL, NULL, NULL, NULL
FROM bad b
WHERE b.depth = 0 AND b.hop = 0
  AND NOT EXISTS (SELECT 1 FROM link_open l WHERE l.target_id = b.url_id AND l.element <> 'redirect')
  -- not correlated: link_fresh (no index by target) is read once, not once a URL
  AND b.url_id NOT IN (SELECT target_id FROM link_fresh WHERE element <> 'redirect');

-- Same rows as before (0015): one per (blocked URL, source) with where the
-- source writes it, one with no source for a blocked URL nothing links to.
DROP VIEW blocked_links;
CREATE VIEW blocked_links AS
SELECT u.crawl_id, u.url, r.status, r.error, s.url AS source, l.element,
       CASE WHEN l.at >= 0 THEN l.at >> 10 ELSE (-l.at) >> 32 END AS line,
       CASE WHEN l.at >= 0 THEN l.at & 1023 ELSE (-l.at) & 4294967295 END AS col
FROM result r
JOIN url u      ON u.id = r.url_id
JOIN link_open l ON l.target_id = u.id AND l.element <> 'redirect'
JOIN url s      ON s.id = l.source_id
WHERE r.class = 'blocked'
UNION ALL
SELECT u.crawl_id, u.url, r.status, r.error, s.url AS source, l.element,
       CASE WHEN l.at >= 0 THEN l.at >> 10 ELSE (-l.at) >> 32 END AS line,
       CASE WHEN l.at >= 0 THEN l.at & 1023 ELSE (-l.at) & 4294967295 END AS col
FROM link_fresh l
JOIN result r ON r.url_id = l.target_id AND r.class = 'blocked'
JOIN url u    ON u.id = r.url_id
JOIN url s    ON s.id = l.source_id
WHERE l.element <> 'redirect'
UNION ALL
SELECT u.crawl_id, u.url, r.status, r.error, NULL, NULL, NULL, NULL
FROM result r
JOIN url u ON u.id = r.url_id
WHERE r.class = 'blocked'
  AND NOT EXISTS (SELECT 1 FROM link_open l WHERE l.target_id = u.id AND l.element <> 'redirect')
  AND u.id NOT IN (SELECT target_id FROM link_fresh WHERE element <> 'redirect');

-- Same rows as before (0015), from both tables of open links.
DROP VIEW broken_fragments;
CREATE VIEW broken_fragments AS
SELECT u.crawl_id,
       u.url || '#' || l.fragment                 AS url,
       r.status,
       'fragment #' || l.fragment || ' not found' AS error,
       s.url                                      AS source,
       l.element,
       l.fragment,
       CASE WHEN l.at >= 0 THEN l.at >> 10 ELSE (-l.at) >> 32 END AS line,
       CASE WHEN l.at >= 0 THEN l.at & 1023 ELSE (-l.at) & 4294967295 END AS col
FROM (SELECT target_id, source_id, fragment, element, at FROM link_open WHERE fragment <> ''
      UNION ALL
      SELECT target_id, source_id, fragment, element, at FROM link_fresh WHERE fragment <> '') l
JOIN url u    ON u.id = l.target_id
JOIN result r ON r.url_id = u.id
JOIN url s    ON s.id = l.source_id
WHERE l.element <> 'redirect'
  AND substr(l.fragment, 1, 3) <> ':~:'
  AND lower(l.fragment) <> 'top'
  AND r.class = 'ok'
  AND EXISTS (SELECT 1 FROM anchor a WHERE a.url_id = u.id AND a.name = '')
  AND NOT EXISTS (SELECT 1 FROM anchor a WHERE a.url_id = u.id AND a.name = l.fragment);
