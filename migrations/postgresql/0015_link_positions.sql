-- Where each link is written in its source page: the 1-based line and column
-- (in characters) of its first occurrence, found when the page is parsed, so a
-- report can point at the line for pages fetched over HTTP as for local files.
-- NULL for links recorded before this migration, redirects, and links whose
-- text was not found. Adding nullable columns rewrites nothing.
ALTER TABLE link_open ADD COLUMN line integer;
ALTER TABLE link_open ADD COLUMN col integer;
ALTER TABLE link_settled ADD COLUMN line integer;
ALTER TABLE link_settled ADD COLUMN col integer;

-- The views that name a link's source also say where the source writes it
-- (columns added at the end, as CREATE OR REPLACE VIEW allows).
CREATE OR REPLACE VIEW link AS
SELECT target_id, source_id, fragment, element, line, col FROM link_open
UNION ALL
SELECT target_id, source_id, fragment, element, line, col FROM link_settled;

CREATE OR REPLACE VIEW broken_links AS
SELECT rv.crawl_id,
       rv.url,
       rv.status,
       rv.error,
       s.url      AS source,
       l.element,
       l.fragment,
       l.line,
       l.col
FROM (SELECT url_id FROM result WHERE class = 'broken'
      UNION
      SELECT url_id FROM result WHERE redirect_to_id IS NOT NULL) candidate
JOIN resolved rv         ON rv.url_id = candidate.url_id
LEFT JOIN link_open l    ON l.target_id = rv.url_id AND l.element <> 'redirect'
LEFT JOIN url s          ON s.id = l.source_id
WHERE rv.class = 'broken'
  AND (l.source_id IS NOT NULL OR (rv.depth = 0 AND rv.hop = 0));

CREATE OR REPLACE VIEW broken_fragments AS
SELECT u.crawl_id,
       u.url || '#' || l.fragment                 AS url,
       r.status,
       'fragment #' || l.fragment || ' not found' AS error,
       s.url                                      AS source,
       l.element,
       l.fragment,
       l.line,
       l.col
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

CREATE OR REPLACE VIEW blocked_links AS
SELECT u.crawl_id, u.url, r.status, r.error, s.url AS source, l.element, l.line, l.col
FROM result r
JOIN url u       ON u.id = r.url_id
LEFT JOIN link_open l ON l.target_id = u.id AND l.element <> 'redirect'
LEFT JOIN url s  ON s.id = l.source_id
WHERE r.class = 'blocked';
