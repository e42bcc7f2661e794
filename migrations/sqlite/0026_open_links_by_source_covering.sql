-- A re-crawl reads a 304 page's open links by source (crawler/store/sqlite/
-- recorded.py): with link_open_source holding only (source_id) and the key,
-- every link cost a search of link_open for its element and position, a
-- random page of the largest table. The index now carries both, so the read
-- is the index alone. It grows by a few bytes a link (bench/RESULTS.md,
-- session 45); the merges that append a run write it as before.
DROP INDEX link_open_source;
CREATE INDEX link_open_source ON link_open (source_id, element, at);
