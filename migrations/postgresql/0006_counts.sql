-- What the end of a crawl reads must not grow with the crawl
-- (as migrations/sqlite/0005_counts.sql, in PostgreSQL's way).
--
-- crawl_count holds, per crawl, how many results are in each class and how
-- many pages were crawled OK ('page'), kept by triggers in the transaction
-- that writes the result, so the summary sums a few rows instead of scanning
-- every URL. Many workers commit at once here: one counter row per crawl and
-- name would be a lock every completion waits for. Each server process
-- (stripe = pg_backend_pid()) adds to rows of its own instead, so no two
-- transactions ever update the same counter row; the summary sums the stripes.
-- Result counts are kept by statement triggers (one upsert per completed
-- batch); the settled flag by a row trigger that fires only when it changes.
CREATE TABLE crawl_count (
    crawl_id  bigint  NOT NULL,
    name      text    NOT NULL,  -- a result class, or 'page'
    stripe    integer NOT NULL,  -- the server process that counted
    n         bigint  NOT NULL,
    PRIMARY KEY (crawl_id, name, stripe)
);
ALTER TABLE crawl_count SET (
    fillfactor = 50,
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 1000
);

INSERT INTO crawl_count (crawl_id, name, stripe, n)
SELECT u.crawl_id, r.class, 0, count(*) FROM result r JOIN url u ON u.id = r.url_id
GROUP BY u.crawl_id, r.class;

INSERT INTO crawl_count (crawl_id, name, stripe, n)
SELECT crawl_id, 'page', 0, count(*) FROM url WHERE settled GROUP BY crawl_id;

CREATE FUNCTION crawl_count_results() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Each branch names only the transition tables its trigger has.
    IF TG_OP = 'INSERT' THEN
        INSERT INTO crawl_count AS k (crawl_id, name, stripe, n)
        SELECT u.crawl_id, x.class, pg_backend_pid(), count(*)
        FROM new_rows x JOIN url u ON u.id = x.url_id
        GROUP BY u.crawl_id, x.class ORDER BY 1, 2
        ON CONFLICT (crawl_id, name, stripe) DO UPDATE SET n = k.n + excluded.n;
    ELSIF TG_OP = 'UPDATE' THEN
        INSERT INTO crawl_count AS k (crawl_id, name, stripe, n)
        SELECT c.crawl_id, c.class, pg_backend_pid(), sum(c.d)
        FROM (SELECT u.crawl_id, x.class, 1 AS d FROM new_rows x JOIN url u ON u.id = x.url_id
              UNION ALL
              SELECT u.crawl_id, x.class, -1 FROM old_rows x JOIN url u ON u.id = x.url_id) c
        GROUP BY c.crawl_id, c.class HAVING sum(c.d) <> 0 ORDER BY 1, 2
        ON CONFLICT (crawl_id, name, stripe) DO UPDATE SET n = k.n + excluded.n;
    ELSE
        INSERT INTO crawl_count AS k (crawl_id, name, stripe, n)
        SELECT u.crawl_id, x.class, pg_backend_pid(), -count(*)
        FROM old_rows x JOIN url u ON u.id = x.url_id
        GROUP BY u.crawl_id, x.class ORDER BY 1, 2
        ON CONFLICT (crawl_id, name, stripe) DO UPDATE SET n = k.n + excluded.n;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER crawl_count_result_insert AFTER INSERT ON result
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION crawl_count_results();
CREATE TRIGGER crawl_count_result_update AFTER UPDATE ON result
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION crawl_count_results();
CREATE TRIGGER crawl_count_result_delete AFTER DELETE ON result
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION crawl_count_results();

CREATE FUNCTION crawl_count_settled() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO crawl_count AS k (crawl_id, name, stripe, n)
    VALUES (NEW.crawl_id, 'page', pg_backend_pid(), CASE WHEN NEW.settled THEN 1 ELSE -1 END)
    ON CONFLICT (crawl_id, name, stripe) DO UPDATE SET n = k.n + excluded.n;
    RETURN NULL;
END $$;

CREATE TRIGGER crawl_count_settled AFTER UPDATE OF settled ON url
    FOR EACH ROW WHEN (OLD.settled IS DISTINCT FROM NEW.settled)
    EXECUTE FUNCTION crawl_count_settled();

-- Same rows as before; it starts from the broken results and the redirects
-- (partial indexes) instead of resolving every URL of the crawl.
CREATE OR REPLACE VIEW broken_links AS
SELECT rv.crawl_id,
       rv.url,
       rv.status,
       rv.error,
       s.url      AS source,
       l.element,
       l.fragment
FROM (SELECT url_id FROM result WHERE class = 'broken'
      UNION
      SELECT url_id FROM result WHERE redirect_to_id IS NOT NULL) candidate
JOIN resolved rv         ON rv.url_id = candidate.url_id
LEFT JOIN link_open l    ON l.target_id = rv.url_id AND l.element <> 'redirect'
LEFT JOIN url s          ON s.id = l.source_id
WHERE rv.class = 'broken'
  AND (l.source_id IS NOT NULL OR (rv.depth = 0 AND rv.hop = 0));
