-- Recurring crawls in the service (`crawler serve --db postgresql://...`):
-- crawl definitions with their schedule position, the definition each run
-- belongs to, and the webhook deliveries of finished runs (pending ones are
-- resumed after a restart). The SQLite service keeps the same tables in its
-- index file (crawler/store/sqlite/service_index.py).

CREATE TABLE service_definition (
    id           bigserial        PRIMARY KEY,
    spec         jsonb            NOT NULL,   -- the validated definition (webhook secret too)
    created_at   double precision NOT NULL,
    updated_at   double precision NOT NULL,
    next_run_at  double precision             -- the schedule's position
);

ALTER TABLE service_crawl ADD COLUMN definition_id bigint;
CREATE INDEX service_crawl_definition ON service_crawl (definition_id)
    WHERE definition_id IS NOT NULL;

CREATE TABLE service_delivery (
    id              bigserial        PRIMARY KEY,
    definition_id   bigint           NOT NULL,
    crawl_id        bigint           NOT NULL,
    url             text             NOT NULL,
    body            bytea            NOT NULL,   -- the bytes sent and signed
    state           text             NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts        integer          NOT NULL,
    created_at      double precision NOT NULL,
    next_attempt_at double precision NOT NULL,
    last_status     integer,
    last_error      text,
    finished_at     double precision
);
