-- New open links are appended, and moved into the target-keyed table in batches
-- (as migrations/sqlite/0016_links_appended_then_merged.sql).
--
-- Every completion inserted its open links (links to URLs not yet settled)
-- straight into link_open, keyed by target: a random leaf of its primary key
-- per link, the largest item of a crawl's server time and half its WAL
-- (bench/RESULTS-postgres.md). Now a completion appends them to link_fresh (a
-- heap without index), and one worker at a time moves link_fresh into
-- link_open sorted by target, in one transaction
-- (crawler.store.postgres.links): each leaf of link_open's keys is written
-- about once per batch instead of once per link.
--
-- Readers see both: every view that read link_open reads link_fresh too, with
-- link_fresh read once (hashed against the few URLs asked about), never once
-- per URL. A link may sit in link_fresh twice (a page completed again), or in
-- both tables, until the next merge.
CREATE TABLE link_fresh (
    target_id  bigint  NOT NULL,
    source_id  bigint  NOT NULL,
    fragment   text    NOT NULL DEFAULT '',
    element    text    NOT NULL,
    line       integer,
    col        integer
);
-- Emptied by every merge: vacuumed by the merge itself when autovacuum is off.
ALTER TABLE link_fresh SET (
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 10000,
    autovacuum_vacuum_cost_delay = 0
);

CREATE OR REPLACE VIEW link AS
SELECT target_id, source_id, fragment, element, line, col FROM link_open
UNION ALL
SELECT target_id, source_id, fragment, element, line, col FROM link_settled
UNION ALL
SELECT t.target_id, p.source_id, ''::text AS fragment, t.element, t.line, t.col
FROM link_settled_page p
CROSS JOIN LATERAL unnest(p.target_ids, p.elements, p.lines, p.cols)
    AS t (target_id, element, line, col)
UNION ALL
SELECT target_id, source_id, fragment, element, line, col FROM link_fresh;

-- The same rows as 0015's: one per (broken URL, source), one with no source for
-- a broken seed nothing links to. Each part resolves its candidates itself (no
-- shared CTE), so a crawl_id asked for reaches every part's scan of url.
CREATE OR REPLACE VIEW broken_links AS
SELECT rv.crawl_id, rv.url, rv.status, rv.error, s.url AS source, l.element, l.fragment,
       l.line, l.col
FROM (SELECT url_id FROM result WHERE class = 'broken'
      UNION
      SELECT url_id FROM result WHERE redirect_to_id IS NOT NULL) candidate
JOIN resolved rv   ON rv.url_id = candidate.url_id
JOIN link_open l   ON l.target_id = rv.url_id AND l.element <> 'redirect'
JOIN url s         ON s.id = l.source_id
WHERE rv.class = 'broken'
UNION ALL
SELECT rv.crawl_id, rv.url, rv.status, rv.error, s.url AS source, l.element, l.fragment,
       l.line, l.col
FROM (SELECT url_id FROM result WHERE class = 'broken'
      UNION
      SELECT url_id FROM result WHERE redirect_to_id IS NOT NULL) candidate
JOIN resolved rv   ON rv.url_id = candidate.url_id
JOIN link_fresh l  ON l.target_id = rv.url_id AND l.element <> 'redirect'
JOIN url s         ON s.id = l.source_id
WHERE rv.class = 'broken'
UNION ALL
SELECT rv.crawl_id, rv.url, rv.status, rv.error, NULL, NULL, NULL, NULL, NULL
FROM (SELECT url_id FROM result WHERE class = 'broken'
      UNION
      SELECT url_id FROM result WHERE redirect_to_id IS NOT NULL) candidate
JOIN resolved rv   ON rv.url_id = candidate.url_id
WHERE rv.class = 'broken' AND rv.depth = 0 AND rv.hop = 0
  AND NOT EXISTS (SELECT 1 FROM link_open l
                  WHERE l.target_id = rv.url_id AND l.element <> 'redirect')
  AND NOT EXISTS (SELECT 1 FROM link_fresh l
                  WHERE l.target_id = rv.url_id AND l.element <> 'redirect');

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
FROM (SELECT target_id, source_id, fragment, element, line, col
      FROM link_open WHERE fragment <> ''
      UNION ALL
      SELECT target_id, source_id, fragment, element, line, col
      FROM link_fresh WHERE fragment <> '') l
JOIN url u    ON u.id = l.target_id
JOIN result r ON r.url_id = u.id
JOIN url s    ON s.id = l.source_id
WHERE l.element <> 'redirect'
  AND substr(l.fragment, 1, 3) <> ':~:'
  AND lower(l.fragment) <> 'top'
  AND r.class = 'ok'
  AND EXISTS (SELECT 1 FROM anchor a WHERE a.url_id = u.id AND a.name = '')
  AND NOT EXISTS (SELECT 1 FROM anchor a WHERE a.url_id = u.id AND a.name = l.fragment);

CREATE OR REPLACE VIEW blocked_links AS
SELECT u.crawl_id, u.url, r.status, r.error, s.url AS source, l.element, l.line, l.col
FROM result r
JOIN url u       ON u.id = r.url_id
JOIN link_open l ON l.target_id = u.id AND l.element <> 'redirect'
JOIN url s       ON s.id = l.source_id
WHERE r.class = 'blocked'
UNION ALL
SELECT u.crawl_id, u.url, r.status, r.error, s.url AS source, l.element, l.line, l.col
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
  AND NOT EXISTS (SELECT 1 FROM link_fresh l WHERE l.target_id = u.id AND l.element <> 'redirect');
