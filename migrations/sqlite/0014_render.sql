-- Rendered pages (--render): what went wrong while a page ran in the browser,
-- and the links only its rendered DOM had.
--
-- A link found only after rendering is an ordinary link row whose element
-- starts with 'js:' (js:a, js:script, ...): every view and report shows it
-- where it shows any link, and rendered_links lists them alone.
CREATE TABLE render_issue (
    url_id   INTEGER NOT NULL REFERENCES url (id),  -- the rendered page
    seq      INTEGER NOT NULL,                      -- order on the page
    kind     TEXT    NOT NULL,  -- script_error, console_error, request_failed,
                                -- request_refused, not_settled, render_failed
    message  TEXT    NOT NULL,
    target   TEXT,              -- the request's URL, for request_* kinds
    PRIMARY KEY (url_id, seq)
) WITHOUT ROWID;

CREATE VIEW render_issues AS
SELECT u.crawl_id, u.url AS page, ri.seq, ri.kind, ri.message, ri.target AS url
FROM render_issue ri
JOIN url u ON u.id = ri.url_id;

CREATE VIEW rendered_links AS
SELECT s.crawl_id, s.url AS source, t.url AS target, substr(l.element, 4) AS element, l.fragment
FROM link l
JOIN url s ON s.id = l.source_id
JOIN url t ON t.id = l.target_id
WHERE l.element LIKE 'js:%';
