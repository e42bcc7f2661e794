-- Open links kept in runs, as SQLite's are since its 0020: link_open becomes
-- a table partitioned by run, and each batch moved out of link_fresh is a new
-- partition, filled in key order and then indexed
-- (crawler.store.postgres.links).
--
-- Merging a batch into one table keyed by target inserted every row into its
-- indexes one by one, each into a leaf anywhere in a tree that grows with the
-- crawl: the largest statement of a crawl's server time and ~7-10 KB of WAL
-- a page (bench/RESULTS-postgres.md). Indexes built once over a run cost a
-- fraction of that. Readers do not change: they read link_open, now the
-- partitioned table, and PostgreSQL searches each run's own index by target
-- or source. A link may sit in two runs (a page completed again), as it could
-- sit in link_fresh and link_open before: readers already keep one of each.
--
-- The links merged so far become run 0 with their indexes. Views are bound to
-- the table they were made on, so every view that reads link_open (ours and
-- any a user made on top of them) is kept as PostgreSQL prints it, with its
-- options, owner, grants and comment, dropped, and made again, as in 0022.
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
        WHERE d.classid = 'pg_rewrite'::regclass AND d.refobjid = 'link_open'::regclass
          AND r.ev_class <> 'link_open'::regclass
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

    -- The table as it was becomes run 0 (a column added with a constant
    -- default is not written into its rows), under the partitioned table.
    ALTER TABLE link_open RENAME TO link_open_run_0;
    ALTER TABLE link_open_run_0 ADD COLUMN run bigint NOT NULL DEFAULT 0;
    ALTER TABLE link_open_run_0 ALTER COLUMN run DROP DEFAULT;
    ALTER TABLE link_open_run_0 ADD CONSTRAINT link_open_run_0_run CHECK (run = 0);
    CREATE TABLE link_open (
        target_id  bigint  NOT NULL,
        source_id  bigint  NOT NULL,
        fragment   text    NOT NULL DEFAULT '',
        element    text    NOT NULL,
        line       integer,
        col        integer,
        run        bigint  NOT NULL
    ) PARTITION BY LIST (run);
    ALTER TABLE link_open ATTACH PARTITION link_open_run_0 FOR VALUES IN (0);

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

-- The next run's number (crawler.store.postgres.links.merge).
CREATE SEQUENCE link_open_run START 1;
