-- The service (`crawler serve --db postgresql://...`) on PostgreSQL: its index
-- of crawls, and what the API needs to show each crawl's workers and rates.
--
-- service_crawl is the index: one row per crawl the service was asked for,
-- with the state the user asked for (queued, running, paused, cancelled,
-- finished, failed, deleting), which the crawl table (running or finished)
-- has no room for. Its id is drawn from the crawl table's own sequence and
-- the crawl row, created when the crawl first starts, takes the same id: no
-- mapping to keep, and CLI crawls in the same database never collide with it.
-- seeded_at is set once the frontier holds the seeds (and sitemap pages):
-- `crawler work` processes join only crawls that are running and seeded, so
-- none can find an empty frontier and declare a crawl finished.

CREATE TABLE service_crawl (
    id           bigint           PRIMARY KEY
                 DEFAULT nextval(pg_get_serial_sequence('crawl', 'id')),
    state        text             NOT NULL CHECK (state IN (
                     'queued', 'running', 'paused', 'cancelled', 'finished', 'failed',
                     'deleting')),
    seeds        jsonb            NOT NULL,   -- array, as given
    settings     jsonb            NOT NULL,   -- the recorded CrawlSettings
    created_at   double precision NOT NULL,
    queued_at    double precision NOT NULL,   -- queue order; set again on resume
    started_at   double precision,
    finished_at  double precision,
    seeded_at    double precision,            -- the frontier holds the seeds: workers may join
    error        text
);
CREATE INDEX service_crawl_running ON service_crawl (queued_at) WHERE state = 'running';

-- What each worker has done, for its rate: URLs done and pages parsed,
-- counted in the transaction that completes them.
ALTER TABLE worker
    ADD COLUMN urls_done  bigint NOT NULL DEFAULT 0,
    ADD COLUMN pages_done bigint NOT NULL DEFAULT 0;
