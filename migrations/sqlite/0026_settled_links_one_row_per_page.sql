-- A page's settled links in one row (a JSON array), not one row each.
--
-- Links to pages already crawled OK (settled: never reported, 0004) were one
-- row each in link_settled, each a cell of its primary key's B-tree inserted
-- inside a group commit: a large part of the writer thread's time, which the
-- whole crawl waits on (bench/RESULTS.md, session 40).
-- Now a completion writes one row per source page holding all of them, as
-- PostgreSQL does (its 0016). link_settled keeps what older versions wrote;
-- the `link` view (every link, whichever table holds it) reads both.
--
-- links: [[target_id, element, at], ...], one entry per target (the first
-- link to it on the page), `at` the packed position (0015) or null.
CREATE TABLE link_settled_page (
    source_id  INTEGER PRIMARY KEY,
    links      TEXT    NOT NULL
);

-- Same columns as before (0020); rendered_links reads it by name.
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
FROM link_settled
UNION ALL
SELECT target_id, source_id, '' AS fragment, element,
       CASE WHEN at >= 0 THEN at >> 10 ELSE (-at) >> 32 END AS line,
       CASE WHEN at >= 0 THEN at & 1023 ELSE (-at) & 4294967295 END AS col
FROM (SELECT p.source_id,
             json_extract(j.value, '$[0]') AS target_id,
             json_extract(j.value, '$[1]') AS element,
             json_extract(j.value, '$[2]') AS at
      FROM link_settled_page p, json_each(p.links) j);
