-- The tables a crawl writes for every page, without foreign-key checks.
--
-- Each row checked ran a trigger (a query of its own) that locked the row it
-- names FOR KEY SHARE: a WAL record and a dirtied heap page for every result
-- and validator written, and for every URL inserted a lock on its crawl's row
-- (which two workers' transactions turn into a MultiXact). The ids written
-- there come from the same transaction or an earlier one, and these rows are
-- deleted only by the store's crawl delete, children first
-- (crawler/store/postgres/service_store.py), so the checks caught nothing and
-- cost a tenth of the server's CPU (bench/RESULTS-postgres.md, session 32).
-- page_validator's ON DELETE CASCADE goes with its key: the delete names it.
ALTER TABLE url DROP CONSTRAINT IF EXISTS url_crawl_id_fkey;
ALTER TABLE url DROP CONSTRAINT IF EXISTS url_host_id_fkey;
ALTER TABLE result DROP CONSTRAINT IF EXISTS result_url_id_fkey;
ALTER TABLE result DROP CONSTRAINT IF EXISTS result_redirect_to_id_fkey;
ALTER TABLE page_validator DROP CONSTRAINT IF EXISTS page_validator_url_id_fkey;
