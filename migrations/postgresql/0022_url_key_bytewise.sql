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
-- PostgreSQL prints it, dropped, and made again from that text; a view that
-- reads another comes after it.
DO $$
DECLARE
    saved text[] := '{}';
    names text[] := '{}';
    pending text[];
    failed text[];
    name text;
    i integer;
BEGIN
    SELECT coalesce(array_agg(v.oid::regclass::text ORDER BY v.oid), '{}'),
           coalesce(array_agg(pg_get_viewdef(v.oid) ORDER BY v.oid), '{}')
    INTO names, saved
    FROM (
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
        SELECT DISTINCT c.oid FROM reader JOIN pg_class c ON c.oid = reader.oid
        WHERE c.relkind = 'v'
    ) v;

    FOREACH name IN ARRAY names LOOP
        EXECUTE format('DROP VIEW IF EXISTS %s CASCADE', name);
    END LOOP;

    ALTER TABLE url ALTER COLUMN url TYPE text COLLATE "C";

    -- In the order they were made, which is the order of their dependencies
    -- unless a CREATE OR REPLACE later made one read a younger view: those
    -- are tried again once the others exist.
    pending := names;
    WHILE cardinality(pending) > 0 LOOP
        failed := '{}';
        FOR i IN 1 .. cardinality(names) LOOP
            CONTINUE WHEN NOT names[i] = ANY(pending);
            BEGIN
                EXECUTE format('CREATE VIEW %s AS %s', names[i], saved[i]);
            EXCEPTION WHEN undefined_table THEN
                failed := failed || names[i];
            END;
        END LOOP;
        IF cardinality(failed) = cardinality(pending) THEN
            RAISE EXCEPTION 'cannot make the views % again', failed;
        END IF;
        pending := failed;
    END LOOP;
END
$$;
