-- Links that are only checked (images, scripts, stylesheets, external links:
-- kind 1 and 2) are leased as soon as they are found, ahead of the pages of
-- the level that links to them. Breadth-first by depth alone left every
-- page's images to the level below it, so on a big site the checks of the
-- whole site piled up behind the last pages (the 1,000,000-page benchmark:
-- 891,000 HEADs during its last 100,000 pages). Pages are still crawled
-- shallowest first; `depth` keeps its meaning (link hops from a seed).
DROP INDEX url_pending;
CREATE INDEX url_pending ON url (crawl_id, depth - (kind < 3), kind, id) WHERE state = 0;
