-- When the frontier got everything a crawl starts from: its seeds (enqueued in
-- the transaction that records the crawl) and the pages its sitemaps list
-- (collected by the first run). NULL: a run enqueues the recorded seeds again
-- (idempotent) and collects the sitemaps before it crawls, so a crawl killed
-- before then is resumed, never declared finished with an empty frontier.
ALTER TABLE crawl ADD COLUMN seeded_at double precision;

-- Crawls recorded by an older version count as seeded when their frontier
-- holds anything; one with an empty frontier (killed between recording the
-- crawl and enqueuing its seeds) gets its seeds on the next resume.
UPDATE crawl SET seeded_at = started_at
WHERE EXISTS (SELECT 1 FROM url WHERE url.crawl_id = crawl.id);
