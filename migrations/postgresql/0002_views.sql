-- Views for the questions users ask: the same names and columns as the SQLite
-- views (migrations/sqlite/0002_views.sql), so the README's queries work on
-- either backend. `crawler report` reads them too.

-- Every URL with its result, in words.
CREATE VIEW url_result AS
SELECT u.crawl_id,
       u.id                                   AS url_id,
       u.url,
       h.name                                 AS host,
       CASE u.kind WHEN 0 THEN 'skip' WHEN 1 THEN 'check' WHEN 2 THEN 'anchors' ELSE 'page' END
           AS kind,
       u.depth,
       CASE u.state WHEN 0 THEN 'pending' WHEN 1 THEN 'leased' ELSE 'done' END AS state,
       r.class,
       r.status,
       r.error_kind,
       r.error,
       t.url                                  AS redirect_to,
       r.content_type,
       r.bytes,
       r.elapsed_ms,
       r.checked_at
FROM url u
LEFT JOIN host h   ON h.id = u.host_id
LEFT JOIN result r ON r.url_id = u.id
LEFT JOIN url t    ON t.id = r.redirect_to_id;

-- Each redirecting URL followed to the end of its chain. A chain ends where
-- a URL does not redirect, where it comes back to a URL already on it (a
-- loop), or after 100 hops.
CREATE VIEW redirect_chain AS
WITH RECURSIVE chain (start_id, cur_id, hops, path) AS (
    SELECT r.url_id, r.redirect_to_id, 1, ARRAY[r.url_id]
    FROM result r
    WHERE r.redirect_to_id IS NOT NULL
    UNION ALL
    SELECT c.start_id, r.redirect_to_id, c.hops + 1, c.path || c.cur_id
    FROM chain c
    JOIN result r ON r.url_id = c.cur_id
    WHERE r.redirect_to_id IS NOT NULL
      AND NOT c.cur_id = ANY (c.path)
      AND c.hops < 100
),
last AS (
    SELECT DISTINCT ON (start_id) start_id, cur_id, hops, path
    FROM chain
    ORDER BY start_id, hops DESC
)
SELECT l.start_id                 AS url_id,
       l.cur_id                   AS final_id,
       l.hops,
       l.cur_id = ANY (l.path)    AS is_loop
FROM last l;

-- The class every URL ends in once redirects are followed: a redirecting URL
-- is broken when its chain loops, is too long, or ends in a broken URL.
CREATE VIEW resolved AS
SELECT u.crawl_id,
       u.id AS url_id,
       u.url,
       u.depth,
       u.hop,
       CASE
           WHEN rc.url_id IS NULL THEN r.class
           WHEN rc.is_loop THEN 'broken'
           WHEN rc.hops > COALESCE((c.config ->> 'max_redirects')::integer, 10) THEN 'broken'
           WHEN fr.class = 'broken' THEN 'broken'
           ELSE 'redirected'
       END AS class,
       CASE WHEN rc.url_id IS NULL THEN r.status
            WHEN rc.is_loop THEN NULL
            ELSE fr.status END AS status,
       CASE
           WHEN rc.url_id IS NULL THEN r.error
           WHEN rc.is_loop THEN 'redirect loop'
           WHEN rc.hops > COALESCE((c.config ->> 'max_redirects')::integer, 10)
               THEN 'too many redirects (' || rc.hops || ')'
           WHEN fr.class = 'broken'
               THEN 'redirects to ' || f.url || ': ' || COALESCE(fr.error, fr.status::text)
           ELSE NULL
       END AS error,
       CASE WHEN rc.url_id IS NULL THEN NULL ELSE f.url END AS final_url,
       COALESCE(rc.hops, 0) AS redirects
FROM url u
JOIN crawl c            ON c.id = u.crawl_id
LEFT JOIN result r      ON r.url_id = u.id
LEFT JOIN redirect_chain rc ON rc.url_id = u.id
LEFT JOIN url f         ON f.id = rc.final_id
LEFT JOIN result fr     ON fr.url_id = rc.final_id;

-- Broken links with the pages that link to them: one row per (link, source).
-- A URL reached only through redirects is reported through the URL that
-- redirects to it; a broken seed has no source.
CREATE VIEW broken_links AS
SELECT rv.crawl_id,
       rv.url,
       rv.status,
       rv.error,
       s.url      AS source,
       l.element,
       l.fragment
FROM resolved rv
LEFT JOIN link l ON l.target_id = rv.url_id AND l.element <> 'redirect'
LEFT JOIN url s  ON s.id = l.source_id
WHERE rv.class = 'broken'
  AND (l.source_id IS NOT NULL OR (rv.depth = 0 AND rv.hop = 0));

-- Every redirect with where it ends.
CREATE VIEW redirects AS
SELECT u.crawl_id, u.url, r.status, t.url AS redirect_to, f.url AS final_url, rc.hops, rc.is_loop
FROM redirect_chain rc
JOIN url u         ON u.id = rc.url_id
JOIN result r      ON r.url_id = rc.url_id
JOIN url t         ON t.id = r.redirect_to_id
JOIN url f         ON f.id = rc.final_id;

-- The slowest responses first.
CREATE VIEW slowest AS
SELECT u.crawl_id, u.url, r.elapsed_ms, r.status, r.bytes
FROM result r JOIN url u ON u.id = r.url_id
WHERE r.elapsed_ms IS NOT NULL
ORDER BY r.elapsed_ms DESC;

-- Requests, failures and time per host.
CREATE VIEW host_summary AS
SELECT u.crawl_id,
       h.name                                           AS host,
       count(*)                                         AS urls,
       count(*) FILTER (WHERE r.class = 'broken')       AS broken,
       count(*) FILTER (WHERE u.kind = 3)               AS pages,
       CAST(avg(r.elapsed_ms) AS integer)               AS avg_ms
FROM url u
JOIN host h ON h.id = u.host_id
LEFT JOIN result r ON r.url_id = u.id
GROUP BY u.crawl_id, h.name;
