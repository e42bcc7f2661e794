-- Anchors for fragment checks, robots.txt as fetched, and the views that use
-- them (as migrations/sqlite/0003_link_checking.sql).

-- The ids and a[name]s of each parsed page, recorded only with
-- --include-fragments. A row with name '' marks "this page was parsed".
CREATE TABLE anchor (
    url_id  bigint NOT NULL,
    name    text   NOT NULL,
    PRIMARY KEY (url_id, name)
);

-- robots.txt per host and crawl, kept so a resumed crawl does not ask again.
CREATE TABLE robots (
    crawl_id    bigint           NOT NULL REFERENCES crawl (id),
    host_id     bigint           NOT NULL REFERENCES host (id),
    status      integer,                    -- NULL when it could not be fetched
    body        text             NOT NULL,
    fetched_at  double precision NOT NULL,
    PRIMARY KEY (crawl_id, host_id)
);

-- Links to page#fragment where the page was parsed and has no such anchor.
-- Text fragments (#:~:text=) and #top are never broken.
CREATE VIEW broken_fragments AS
SELECT u.crawl_id,
       u.url || '#' || l.fragment                 AS url,
       r.status,
       'fragment #' || l.fragment || ' not found' AS error,
       s.url                                      AS source,
       l.element,
       l.fragment
FROM link l
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

-- Links answered by a bot wall (Cloudflare challenge, 999, ...), with sources.
CREATE VIEW blocked_links AS
SELECT u.crawl_id, u.url, r.status, r.error, s.url AS source, l.element
FROM result r
JOIN url u       ON u.id = r.url_id
LEFT JOIN link l ON l.target_id = u.id AND l.element <> 'redirect'
LEFT JOIN url s  ON s.id = l.source_id
WHERE r.class = 'blocked';

-- Results in the order they were checked, for streaming (-f jsonl) and "what's new".
CREATE INDEX result_checked ON result (checked_at, url_id);
