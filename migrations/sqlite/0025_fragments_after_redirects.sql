-- A link's #fragment is looked for on the page its redirects end at.
--
-- A browser following `/old#intro` to a `301 Location: /new` scrolls to
-- #intro on /new; lychee checks it there too. Before, a link to a redirecting
-- URL had its fragment checked nowhere: a section renamed on the moved page
-- passed. The fragment is now checked on the chain's final page when that
-- page was fetched fine with its anchors recorded (the engine fetches it with
-- GET: crawler/outcome.py). The row names the link as written; its error
-- says where the chain ended. A `Location` that carries a fragment of its own
-- is not followed there (as lychee): the link's fragment is checked.
-- Same columns as before (0020).
DROP VIEW broken_fragments;
CREATE VIEW broken_fragments AS
SELECT u.crawl_id,
       u.url || '#' || l.fragment                 AS url,
       fr.status,
       'fragment #' || l.fragment || ' not found'
           || CASE WHEN f.id = u.id THEN '' ELSE ' (redirected to ' || f.url || ')' END
                                                  AS error,
       s.url                                      AS source,
       l.element,
       l.fragment,
       CASE WHEN l.at >= 0 THEN l.at >> 10 ELSE (-l.at) >> 32 END AS line,
       CASE WHEN l.at >= 0 THEN l.at & 1023 ELSE (-l.at) & 4294967295 END AS col
FROM (SELECT target_id, source_id, fragment, element, at FROM link_open WHERE fragment <> ''
      UNION ALL
      SELECT target_id, source_id, fragment, element, at FROM link_fresh WHERE fragment <> '') l
JOIN url u                  ON u.id = l.target_id
JOIN result r               ON r.url_id = u.id
LEFT JOIN redirect_chain rc ON r.class = 'redirected' AND rc.url_id = u.id AND NOT rc.is_loop
JOIN url f                  ON f.id = CASE WHEN r.class = 'ok' THEN u.id ELSE rc.final_id END
JOIN result fr              ON fr.url_id = f.id
JOIN url s                  ON s.id = l.source_id
WHERE l.element <> 'redirect'
  AND substr(l.fragment, 1, 3) <> ':~:'
  AND lower(l.fragment) <> 'top'
  AND fr.class = 'ok'
  AND EXISTS (SELECT 1 FROM anchor a WHERE a.url_id = f.id AND a.name = '')
  AND NOT EXISTS (SELECT 1 FROM anchor a WHERE a.url_id = f.id AND a.name = l.fragment);
