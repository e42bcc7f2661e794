-- What each worker has done, for the service's per-worker rates: URLs done
-- and pages parsed, counted in the transaction that completes them (as
-- migrations/postgresql/0008_service.sql).
ALTER TABLE worker ADD COLUMN urls_done INTEGER NOT NULL DEFAULT 0;
ALTER TABLE worker ADD COLUMN pages_done INTEGER NOT NULL DEFAULT 0;
