-- Per-host politeness shared by every worker on the database (PostgreSQL only;
-- a SQLite crawl keeps it in memory, crawler/politeness.py).
--
-- host_gate holds a host's next allowed request start; a worker claims the row
-- with SELECT ... FOR UPDATE SKIP LOCKED, so workers never queue behind each
-- other on a busy host. host_slot counts the requests a worker has in flight
-- on a host; a slot expires with its owner's leases (renewed with them), so a
-- worker killed mid-request gives its slots back without anyone's help.
-- Politeness is towards the host: crawls running at once share its row.

CREATE TABLE host_gate (
    host_id          bigint           PRIMARY KEY REFERENCES host (id),
    next_allowed_at  double precision NOT NULL DEFAULT 0  -- unix seconds
);

CREATE TABLE host_slot (
    host_id     bigint           NOT NULL REFERENCES host (id),
    owner       text             NOT NULL,  -- the worker's token (worker.token)
    in_flight   integer          NOT NULL,
    expires_at  double precision NOT NULL,
    PRIMARY KEY (host_id, owner)
);
CREATE INDEX host_slot_owner ON host_slot (owner);
ALTER TABLE host_gate SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 500);
ALTER TABLE host_slot SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 500);
