-- The crawl's cookie jar, and HEAD answers a confirming GET overruled
-- (as migrations/sqlite/0008_cookies_and_head_status.sql).

-- Cookies kept by a crawl (on unless --no-cookies), so a resumed run and every
-- worker send what the site set. One row per cookie identity (domain, path,
-- name); a deleted cookie stays as a row whose expires_at has passed, so
-- other workers learn of the deletion. At most DEFAULT_MAX_COOKIES_PER_HOST
-- rows per domain.
CREATE TABLE cookie (
    crawl_id    bigint           NOT NULL REFERENCES crawl (id),
    domain      text             NOT NULL,   -- without a leading dot
    path        text             NOT NULL,
    name        text             NOT NULL,
    value       text             NOT NULL,   -- as the server sent it
    host_only   boolean          NOT NULL,   -- no Domain attribute: this host only
    secure      boolean          NOT NULL,
    http_only   boolean          NOT NULL,
    expires_at  double precision,            -- unix seconds; NULL for a session cookie
    updated_at  double precision NOT NULL,
    PRIMARY KEY (crawl_id, domain, path, name)
);
-- Workers read the cookies changed since they last looked.
CREATE INDEX cookie_updated ON cookie (crawl_id, updated_at);

-- HEAD's status when a GET sent to confirm a "broken" HEAD answered otherwise
-- (the result is the GET's). NULL when HEAD was not overruled.
ALTER TABLE result ADD COLUMN head_status integer;
-- The hosts whose HEAD answers are not to be trusted, read at each start.
CREATE INDEX result_head_status ON result (url_id) WHERE head_status IS NOT NULL;

-- url_result gains head_status (as its last column).
CREATE OR REPLACE VIEW url_result AS
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
       r.checked_at,
       r.head_status
FROM url u
LEFT JOIN host h   ON h.id = u.host_id
LEFT JOIN result r ON r.url_id = u.id
LEFT JOIN url t    ON t.id = r.redirect_to_id;
