-- The result counts' trigger (0006) finds each result's crawl by its URL's id,
-- one primary-key lookup a row (a scalar subquery), instead of joining the
-- transition table to ``url``. Given the join, the planner trusted statistics
-- taken when ``url`` was small and scanned the whole table at every batch of
-- results (a hash join): the crawl's time grew with its size
-- (bench/RESULTS-postgres.md, session 25). As with the join, a result whose URL
-- is gone (deleted in the same statement) counts for no crawl.

CREATE OR REPLACE FUNCTION crawl_count_results() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Each branch names only the transition tables its trigger has.
    IF TG_OP = 'INSERT' THEN
        INSERT INTO crawl_count AS k (crawl_id, name, stripe, n)
        SELECT c.crawl_id, c.class, pg_backend_pid(), count(*)
        FROM (SELECT (SELECT u.crawl_id FROM url u WHERE u.id = x.url_id) AS crawl_id, x.class
              FROM new_rows x) c
        WHERE c.crawl_id IS NOT NULL
        GROUP BY c.crawl_id, c.class ORDER BY 1, 2
        ON CONFLICT (crawl_id, name, stripe) DO UPDATE SET n = k.n + excluded.n;
    ELSIF TG_OP = 'UPDATE' THEN
        INSERT INTO crawl_count AS k (crawl_id, name, stripe, n)
        SELECT c.crawl_id, c.class, pg_backend_pid(), sum(c.d)
        FROM (SELECT (SELECT u.crawl_id FROM url u WHERE u.id = x.url_id) AS crawl_id,
                     x.class, 1 AS d
              FROM new_rows x
              UNION ALL
              SELECT (SELECT u.crawl_id FROM url u WHERE u.id = x.url_id), x.class, -1
              FROM old_rows x) c
        WHERE c.crawl_id IS NOT NULL
        GROUP BY c.crawl_id, c.class HAVING sum(c.d) <> 0 ORDER BY 1, 2
        ON CONFLICT (crawl_id, name, stripe) DO UPDATE SET n = k.n + excluded.n;
    ELSE
        INSERT INTO crawl_count AS k (crawl_id, name, stripe, n)
        SELECT c.crawl_id, c.class, pg_backend_pid(), -count(*)
        FROM (SELECT (SELECT u.crawl_id FROM url u WHERE u.id = x.url_id) AS crawl_id, x.class
              FROM old_rows x) c
        WHERE c.crawl_id IS NOT NULL
        GROUP BY c.crawl_id, c.class ORDER BY 1, 2
        ON CONFLICT (crawl_id, name, stripe) DO UPDATE SET n = k.n + excluded.n;
    END IF;
    RETURN NULL;
END $$;
