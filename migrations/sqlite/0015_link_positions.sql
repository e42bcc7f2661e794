-- Where each link is written in its source page: the 1-based line and column
-- (in characters) of its first occurrence, found when the page is parsed, so a
-- report can point at the line for pages fetched over HTTP as for local files.
--
-- Stored packed in one integer per link, `at`, because SQLite stores small
-- integers in 1-3 bytes plus one header byte per column: two columns cost ~5
-- bytes a link, one packed column ~3 (measured on the 10,000-page bench site:
-- 48 links a page). `at` = line * 1024 + column while the column is below 1024
-- (nearly always); a column from 1024 on (minified HTML) is stored negated:
-- -(line * 2^32 + column). NULL for links recorded before this migration,
-- redirects, and links whose text was not found. The views decode it into
-- `line` and `col`; query those.
ALTER TABLE link_open ADD COLUMN at INTEGER;
ALTER TABLE link_settled ADD COLUMN at INTEGER;

-- The views that name a link's source also say where the source writes it.
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
FROM link_settled;

DROP VIEW broken_links;
CREATE VIEW broken_links AS
SELECT rv.crawl_id,
       rv.url,
       rv.status,
       rv.error,
       s.url      AS source,
       l.element,
       l.fragment,
       CASE WHEN l.at >= 0 THEN l.at >> 10 ELSE (-l.at) >> 32 END AS line,
       CASE WHEN l.at >= 0 THEN l.at & 1023 ELSE (-l.at) & 4294967295 END AS col
FROM (SELECT url_id FROM result WHERE class = 'broken'
      UNION
      SELECT url_id FROM result WHERE redirect_to_id IS NOT NULL) candidate
JOIN resolved rv         ON rv.url_id = candidate.url_id
LEFT JOIN link_open l    ON l.target_id = rv.url_id AND l.element <> 'redirect'
LEFT JOIN url s          ON s.id = l.source_id
WHERE rv.class = 'broken'
  AND (l.source_id IS NOT NULL OR (rv.depth = 0 AND rv.hop = 0));

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
FROM link_open l
JOIN url u    ON u.id = l.target_id
JOIN result r ON r.url_id = u.id
JOIN url s    ON s.id = l.source_id
WHERE l.fragment <> ''
  AND l.element <> 'redirect'
  AND substr(l.fragment, 1, 3) <> ':~:'
  AND lower(l.fragment) <> 'top'
  AND r.class = 'ok'
  AND EXISTS (SELECT 1 FROM anchor a WHERE a.url_id = u.id AND a.name = '')
  AND NOT EXISTS (SELECT 1 FROM anchor a WHERE a.url_id = u.id AND a.name = l.fragment);

DROP VIEW blocked_links;
CREATE VIEW blocked_links AS
SELECT u.crawl_id, u.url, r.status, r.error, s.url AS source, l.element,
       CASE WHEN l.at >= 0 THEN l.at >> 10 ELSE (-l.at) >> 32 END AS line,
       CASE WHEN l.at >= 0 THEN l.at & 1023 ELSE (-l.at) & 4294967295 END AS col
FROM result r
JOIN url u       ON u.id = r.url_id
LEFT JOIN link_open l ON l.target_id = u.id AND l.element <> 'redirect'
LEFT JOIN url s  ON s.id = l.source_id
WHERE r.class = 'blocked';
