-- A page's settled links in one row (as arrays), not one row each.
--
-- Links to pages already crawled OK (settled: never reported) were ~20 rows
-- per page in link_settled, each a heap tuple and a primary-key entry with its
-- WAL records: with link_open, the largest item of a crawl's server time
-- (pg_stat_statements, 10,000 pages: 0.32 ms and 6 KB of WAL per page). Now a
-- completion writes one row per source page. link_settled keeps what older
-- versions wrote; the `link` view (every link, whichever table holds it)
-- reads both, with where each source writes its link (`line`, `col`: 0015).
CREATE TABLE link_settled_page (
    source_id   bigint    PRIMARY KEY,
    target_ids  bigint[]  NOT NULL,
    elements    text[]    NOT NULL,   -- the element of each target, same order
    lines       integer[] NOT NULL,   -- its line (NULL: not found), same order
    cols        integer[] NOT NULL    -- its column, same order
);

CREATE OR REPLACE VIEW link AS
SELECT target_id, source_id, fragment, element, line, col FROM link_open
UNION ALL
SELECT target_id, source_id, fragment, element, line, col FROM link_settled
UNION ALL
SELECT t.target_id, p.source_id, ''::text AS fragment, t.element, t.line, t.col
FROM link_settled_page p
CROSS JOIN LATERAL unnest(p.target_ids, p.elements, p.lines, p.cols)
    AS t (target_id, element, line, col);
