-- Links that are only checked (kind 1 and 2) are leased ahead of the pages of
-- the level that links to them (as migrations/sqlite/0006): the lease order
-- is depth - (kind < 3), kind, id. The lease walks this index in that order
-- and stops after its LIMIT rows, never sorting the pending rows;
-- next_attempt_at is carried in the index so a row waiting for its retry is
-- passed over without visiting the heap.
DROP INDEX url_pending;
CREATE INDEX url_pending ON url (crawl_id, (depth - (kind < 3)::integer), kind, id)
    INCLUDE (next_attempt_at) WHERE state = 0;
