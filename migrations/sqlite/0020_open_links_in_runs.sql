-- Open links kept in runs: each batch moved out of link_fresh is appended as a
-- run of its own, sorted by target inside the run.
--
-- link_open was one B-tree keyed by target, and each batch (0016) was merged
-- into it: sorted, but spread over the whole tree, so a merge rewrote about
-- every page of link_open, to the WAL and again at the checkpoint. As
-- link_open grew (a 1,000,000-page crawl keeps tens of millions of open links)
-- and the batch did not (as many rows as the crawl has URLs), the bytes
-- written per link grew with it: most of the growth of the bytes written per
-- page over such a crawl. Keyed by (run, target, ...), a batch is appended at
-- the end of the tree: each page written once.
--
-- "Who links to this URL?" is now one search per run: read link_run, then
-- link_open by (run, target_id). A batch is as large as the crawl has URLs, so
-- a crawl keeps about (open links / URLs) runs, a dozen on the bench site.
-- A run is written in one transaction with the delete of its rows from
-- link_fresh (crawler/store/sqlite/links.py): no reader sees a link twice
-- because of a merge cut short.
CREATE TABLE link_run (
    id        INTEGER PRIMARY KEY,
    rows      INTEGER NOT NULL,
    merged_at REAL    NOT NULL
);

DROP VIEW rendered_links;
DROP VIEW link;
DROP VIEW broken_links;
DROP VIEW blocked_links;
DROP VIEW broken_fragments;

ALTER TABLE link_open RENAME TO link_open_0016;
DROP INDEX link_open_source;

CREATE TABLE link_open (
    run        INTEGER NOT NULL,
    target_id  INTEGER NOT NULL,
    source_id  INTEGER NOT NULL,
    fragment   TEXT    NOT NULL DEFAULT '',
    element    TEXT    NOT NULL,               -- a, img, script, link, redirect, ...
    at         INTEGER,                        -- line and column, packed (0015)
    PRIMARY KEY (run, target_id, source_id, fragment)
) WITHOUT ROWID;

-- The links already merged become run 1 (a database without any: no run).
INSERT INTO link_run (id, rows, merged_at)
SELECT 1, count(*), (julianday('now') - 2440587.5) * 86400.0
FROM link_open_0016 HAVING count(*) > 0;
INSERT INTO link_open (run, target_id, source_id, fragment, element, at)
SELECT 1, target_id, source_id, fragment, element, at FROM link_open_0016
ORDER BY target_id, source_id, fragment;
DROP TABLE link_open_0016;

-- A re-crawl reads the previous crawl's links by source (0012).
CREATE INDEX link_open_source ON link_open (source_id);

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

CREATE VIEW rendered_links AS
SELECT s.crawl_id, s.url AS source, t.url AS target, substr(l.element, 4) AS element, l.fragment
FROM link l
JOIN url s ON s.id = l.source_id
JOIN url t ON t.id = l.target_id
WHERE l.element LIKE 'js:%';

-- The same rows as 0016's: link_open searched run by run.
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
CROSS JOIN link_run lr
CROSS JOIN link_open l ON l.run = lr.id AND l.target_id = b.url_id AND l.element <> 'redirect'
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
  AND NOT EXISTS (SELECT 1 FROM link_run lr CROSS JOIN link_open l
                  WHERE l.run = lr.id AND l.target_id = b.url_id AND l.element <> 'redirect')
  -- not correlated: link_fresh (no index by target) is read once, not once a URL
  AND b.url_id NOT IN (SELECT target_id FROM link_fresh WHERE element <> 'redirect');

CREATE VIEW blocked_links AS
SELECT u.crawl_id, u.url, r.status, r.error, s.url AS source, l.element,
       CASE WHEN l.at >= 0 THEN l.at >> 10 ELSE (-l.at) >> 32 END AS line,
       CASE WHEN l.at >= 0 THEN l.at & 1023 ELSE (-l.at) & 4294967295 END AS col
FROM result r
JOIN url u      ON u.id = r.url_id
CROSS JOIN link_run lr
CROSS JOIN link_open l ON l.run = lr.id AND l.target_id = u.id AND l.element <> 'redirect'
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
  AND NOT EXISTS (SELECT 1 FROM link_run lr CROSS JOIN link_open l
                  WHERE l.run = lr.id AND l.target_id = u.id AND l.element <> 'redirect')
  AND u.id NOT IN (SELECT target_id FROM link_fresh WHERE element <> 'redirect');

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
