-- Crawls that recur: what a re-crawl starts from (migrations/sqlite/0012_recrawl.sql).
--
-- page_validator keeps the ETag and Last-Modified a page was served with
-- (pages crawled with an OK answer only), so the next crawl of the site can
-- ask "changed since?" (If-None-Match / If-Modified-Since). A page answered
-- 304 Not Modified takes its links from the edges the previous crawl stored
-- for it: link_open is read by source for that (link_settled is keyed by
-- source already). crawl.previous_crawl_id names the crawl a re-crawl starts
-- from; no foreign key, so deleting an old crawl never blocks on it.
CREATE TABLE page_validator (
    url_id         bigint PRIMARY KEY REFERENCES url (id) ON DELETE CASCADE,
    etag           text,
    last_modified  text
);

CREATE INDEX link_open_source ON link_open (source_id);

ALTER TABLE crawl ADD COLUMN previous_crawl_id bigint;
