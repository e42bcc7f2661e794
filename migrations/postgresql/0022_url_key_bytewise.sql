-- The URL key compared byte by byte (COLLATE "C"), not by the database's
-- locale. Every link of a page not in a worker's cache is looked up by its
-- URL (``url = ANY(...)``) and every new URL inserted into the unique
-- (crawl_id, url) index; under a locale's collation (en_US.UTF-8, or C.UTF-8
-- before PostgreSQL 17) each comparison of that B-tree goes through strcoll.
-- Equality is the same either way (the key is exact), so no lookup's answer
-- changes; only ORDER BY url does, and reports sort in Python.
--
-- A column's type cannot change under the views that read it, so every view
-- that reads ``url`` (ours, and any a user made on top of them) is kept as
-- PostgreSQL prints it, with its options, owner, grants and comment, dropped,
-- and made again from that; a view that reads another comes after it.
DO $$
DECLARE
    oids oid[];
    names text[];
    pending text[];  -- CREATE VIEW, a view's text, until it is made
    kept text[];     -- owners, grants and comments, once every view is made
    failed text[];
    statement text;
BEGIN
    WITH RECURSIVE reader(oid) AS (
        SELECT r.ev_class
        FROM pg_depend d JOIN pg_rewrite r ON r.oid = d.objid
        WHERE d.classid = 'pg_rewrite'::regclass AND d.refobjid = 'url'::regclass
          AND r.ev_class <> 'url'::regclass
        UNION
        SELECT r.ev_class
        FROM reader JOIN pg_depend d ON d.refobjid = reader.oid
        JOIN pg_rewrite r ON r.oid = d.objid
        WHERE d.classid = 'pg_rewrite'::regclass AND r.ev_class <> reader.oid
    )
    SELECT coalesce(array_agg(c.oid ORDER BY c.oid), '{}'),
           coalesce(array_agg(c.oid::regclass::text ORDER BY c.oid), '{}'),
           coalesce(array_agg(
               format('CREATE VIEW %s%s AS %s', c.oid::regclass,
                      CASE WHEN c.reloptions IS NULL THEN ''
                           ELSE format(' WITH (%s)', array_to_string(c.reloptions, ', ')) END,
                      pg_get_viewdef(c.oid))
               ORDER BY c.oid), '{}')
    INTO oids, names, pending
    FROM pg_class c
    WHERE c.oid IN (SELECT oid FROM reader) AND c.relkind = 'v';

    SELECT coalesce(array_agg(x.statement ORDER BY x.oid, x.step), '{}') INTO kept
    FROM (
        SELECT c.oid, 1 AS step,
               format('ALTER VIEW %s OWNER TO %s', c.oid::regclass, c.relowner::regrole) AS statement
        FROM pg_class c
        WHERE c.oid = ANY(oids) AND c.relowner <> current_user::regrole
        UNION ALL
        SELECT c.oid, 2,
               format('GRANT %s ON %s TO %s%s', g.privilege_type, c.oid::regclass,
                      CASE WHEN g.grantee = 0 THEN 'PUBLIC' ELSE g.grantee::regrole::text END,
                      CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END)
        FROM pg_class c, aclexplode(c.relacl) g
        WHERE c.oid = ANY(oids) AND g.grantee <> c.relowner
        UNION ALL
        SELECT c.oid, 3, format('COMMENT ON VIEW %s IS %L', c.oid::regclass, d.description)
        FROM pg_class c
        JOIN pg_description d ON d.objoid = c.oid AND d.classoid = 'pg_class'::regclass
                             AND d.objsubid = 0
        WHERE c.oid = ANY(oids)
    ) x;

    IF cardinality(names) > 0 THEN
        EXECUTE format('DROP VIEW IF EXISTS %s CASCADE', array_to_string(names, ', '));
    END IF;

    ALTER TABLE url ALTER COLUMN url TYPE text COLLATE "C";

    -- In the order they were made, which is the order of their dependencies
    -- unless a CREATE OR REPLACE later made one read a younger view: those
    -- are tried again once the others exist.
    WHILE cardinality(pending) > 0 LOOP
        failed := '{}';
        FOREACH statement IN ARRAY pending LOOP
            BEGIN
                EXECUTE statement;
            EXCEPTION WHEN undefined_table THEN
                failed := failed || statement;
            END;
        END LOOP;
        IF cardinality(failed) = cardinality(pending) THEN
            RAISE EXCEPTION 'cannot make these views again: %', array_to_string(failed, '; ');
        END IF;
        pending := failed;
    END LOOP;
    FOREACH statement IN ARRAY kept LOOP
        EXECUTE statement;
    END LOOP;
END
$$;
