-- What the end of a crawl reads must not grow with the crawl.
--
-- crawl_count holds, per crawl, how many results are in each class and how
-- many pages were crawled OK ('page'), kept by triggers in the transaction
-- that writes the result, so the summary reads a few rows instead of scanning
-- every URL (seconds at a million pages). The triggers avoid INSERT OR IGNORE:
-- the conflict policy of the statement firing them would replace it.
-- broken_links starts from the results that can be broken (partial indexes)
-- instead of from every URL.
CREATE TABLE crawl_count (
    crawl_id  INTEGER NOT NULL,
    name      TEXT    NOT NULL,  -- a result class, or 'page'
    n         INTEGER NOT NULL,
    PRIMARY KEY (crawl_id, name)
) WITHOUT ROWID;

INSERT INTO crawl_count (crawl_id, name, n)
SELECT u.crawl_id, r.class, count(*) FROM result r JOIN url u ON u.id = r.url_id
GROUP BY u.crawl_id, r.class;

INSERT INTO crawl_count (crawl_id, name, n)
SELECT crawl_id, 'page', count(*) FROM url WHERE settled = 1 GROUP BY crawl_id;

CREATE TRIGGER crawl_count_result_insert AFTER INSERT ON result
BEGIN
    INSERT INTO crawl_count (crawl_id, name, n)
    SELECT u.crawl_id, NEW.class, 0 FROM url u WHERE u.id = NEW.url_id
      AND NOT EXISTS (SELECT 1 FROM crawl_count k WHERE k.crawl_id = u.crawl_id AND k.name = NEW.class);
    UPDATE crawl_count SET n = n + 1
    WHERE name = NEW.class AND crawl_id = (SELECT crawl_id FROM url WHERE id = NEW.url_id);
END;

CREATE TRIGGER crawl_count_result_update AFTER UPDATE OF class ON result
WHEN OLD.class <> NEW.class
BEGIN
    INSERT INTO crawl_count (crawl_id, name, n)
    SELECT u.crawl_id, NEW.class, 0 FROM url u WHERE u.id = NEW.url_id
      AND NOT EXISTS (SELECT 1 FROM crawl_count k WHERE k.crawl_id = u.crawl_id AND k.name = NEW.class);
    UPDATE crawl_count SET n = n - 1
    WHERE name = OLD.class AND crawl_id = (SELECT crawl_id FROM url WHERE id = OLD.url_id);
    UPDATE crawl_count SET n = n + 1
    WHERE name = NEW.class AND crawl_id = (SELECT crawl_id FROM url WHERE id = NEW.url_id);
END;

CREATE TRIGGER crawl_count_result_delete AFTER DELETE ON result
BEGIN
    UPDATE crawl_count SET n = n - 1
    WHERE name = OLD.class AND crawl_id = (SELECT crawl_id FROM url WHERE id = OLD.url_id);
END;

CREATE TRIGGER crawl_count_settled AFTER UPDATE OF settled ON url
WHEN OLD.settled <> NEW.settled
BEGIN
    INSERT INTO crawl_count (crawl_id, name, n)
    SELECT NEW.crawl_id, 'page', 0
    WHERE NOT EXISTS (SELECT 1 FROM crawl_count WHERE crawl_id = NEW.crawl_id AND name = 'page');
    UPDATE crawl_count SET n = n + (CASE WHEN NEW.settled THEN 1 ELSE -1 END)
    WHERE crawl_id = NEW.crawl_id AND name = 'page';
END;

-- Same rows as before; it starts from the broken results and the redirects.
DROP VIEW broken_links;
CREATE VIEW broken_links AS
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
