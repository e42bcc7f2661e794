-- Links to pages already crawled and found fine are kept apart from the rest
-- (as migrations/sqlite/0004_settled_links.sql).
--
-- A link whose target was a page crawled with an OK result when the link was
-- recorded ("settled": a page is never fetched again) can never appear in a
-- broken, blocked or redirect report. Such links go to link_settled, keyed by
-- source, so recording a page's links appends to the end of its B-tree; the
-- target-keyed table (now link_open) costs one random page per link. The views
-- that read `link` follow the rename to link_open (PostgreSQL views name
-- tables by oid); the new view `link` is every link, for users' queries.
ALTER TABLE link RENAME TO link_open;

ALTER TABLE url ADD COLUMN settled boolean NOT NULL DEFAULT false;  -- page crawled, OK

CREATE TABLE link_settled (
    source_id  bigint NOT NULL,
    target_id  bigint NOT NULL,
    fragment   text   NOT NULL DEFAULT '',
    element    text   NOT NULL,
    PRIMARY KEY (source_id, target_id, fragment)
);

-- Every link, whichever table holds it: who links to what.
CREATE VIEW link AS
SELECT target_id, source_id, fragment, element FROM link_open
UNION ALL
SELECT target_id, source_id, fragment, element FROM link_settled;

-- broken_fragments reads only links with a fragment: a few, out of millions.
CREATE INDEX link_open_fragment ON link_open (target_id) WHERE fragment <> '';

-- Pages already crawled OK before this migration are settled too.
UPDATE url SET settled = true
WHERE kind = 3 AND state = 2
  AND id IN (SELECT url_id FROM result WHERE class = 'ok');
