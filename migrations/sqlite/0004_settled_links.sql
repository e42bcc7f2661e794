-- Links to pages already crawled and found fine are kept apart from the rest.
--
-- A link whose target was a page crawled with an OK result when the link was
-- recorded ("settled": a page is never fetched again) can never appear in a
-- broken, blocked or redirect report. Such links go to link_settled, keyed by
-- source, so recording a page's links appends a few B-tree pages per commit;
-- the target-keyed table (now link_open) costs one random page per link, which
-- made the crawl slow down as the database grew. The reports' views read
-- link_open (renaming the table rewrites them); `link` is a view of every link.
ALTER TABLE link RENAME TO link_open;

ALTER TABLE url ADD COLUMN settled INTEGER NOT NULL DEFAULT 0;  -- 1: page crawled, OK

CREATE TABLE link_settled (
    source_id  INTEGER NOT NULL,
    target_id  INTEGER NOT NULL,
    fragment   TEXT    NOT NULL DEFAULT '',
    element    TEXT    NOT NULL,
    PRIMARY KEY (source_id, target_id, fragment)
) WITHOUT ROWID;

-- Every link, whichever table holds it: who links to what.
CREATE VIEW link AS
SELECT target_id, source_id, fragment, element FROM link_open
UNION ALL
SELECT target_id, source_id, fragment, element FROM link_settled;

-- Pages already crawled OK before this migration are settled too.
UPDATE url SET settled = 1
WHERE kind = 3 AND state = 2
  AND id IN (SELECT url_id FROM result WHERE class = 'ok');
