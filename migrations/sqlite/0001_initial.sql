-- The frontier, the visited set and the results of a crawl, in one file.
-- Frontier and visited set are the same table (url): its UNIQUE key is the
-- dedup, its state column is the frontier, and "nothing pending or leased"
-- read inside one transaction is the end of the crawl.

CREATE TABLE crawl (
    id           INTEGER PRIMARY KEY,
    seeds        TEXT    NOT NULL,                 -- JSON array, as given by the user
    config       TEXT    NOT NULL,                 -- JSON of the effective settings
    state        TEXT    NOT NULL DEFAULT 'running'
                 CHECK (state IN ('running', 'finished')),
    started_at   REAL    NOT NULL,                 -- unix seconds
    finished_at  REAL,
    elapsed_s    REAL    NOT NULL DEFAULT 0        -- active time, summed over resumes
);

CREATE TABLE host (
    id    INTEGER PRIMARY KEY,
    name  TEXT    NOT NULL UNIQUE                  -- authority: host[:port]
);

CREATE TABLE url (
    id                INTEGER PRIMARY KEY,
    crawl_id          INTEGER NOT NULL REFERENCES crawl (id),
    url               TEXT    NOT NULL,            -- normalized, without fragment
    host_id           INTEGER REFERENCES host (id),  -- NULL when not HTTP
    kind              INTEGER NOT NULL,            -- 0 skip, 1 check, 2 anchors, 3 page
    depth             INTEGER NOT NULL,            -- link hops from a seed
    hop               INTEGER NOT NULL DEFAULT 0,  -- redirect hops from a linked URL
    state             INTEGER NOT NULL DEFAULT 0,  -- 0 pending, 1 leased, 2 done
    lease_owner       TEXT,
    lease_expires_at  REAL,
    attempts          INTEGER NOT NULL DEFAULT 0,
    next_attempt_at   REAL    NOT NULL DEFAULT 0,
    UNIQUE (crawl_id, url)
);
-- The lease query walks this: pending rows only, shallowest first.
CREATE INDEX url_pending ON url (crawl_id, depth, id) WHERE state = 0;
-- Renewal, release and reclaim touch only leased rows.
CREATE INDEX url_leased ON url (crawl_id, lease_expires_at) WHERE state = 1;

CREATE TABLE result (
    url_id          INTEGER PRIMARY KEY REFERENCES url (id),
    class           TEXT    NOT NULL,  -- ok, redirected, broken, skipped, excluded
    status          INTEGER,           -- HTTP status, NULL when no response
    error_kind      TEXT,              -- see crawler.errors.FailureKind
    error           TEXT,              -- human-readable reason
    redirect_to_id  INTEGER REFERENCES url (id),  -- next hop of a 3xx
    content_type    TEXT,
    bytes           INTEGER,
    elapsed_ms      INTEGER,
    checked_at      REAL    NOT NULL
);
CREATE INDEX result_broken ON result (url_id) WHERE class = 'broken';
CREATE INDEX result_redirect ON result (redirect_to_id) WHERE redirect_to_id IS NOT NULL;

-- One row per (target, source, fragment): who links to what. Keyed by target
-- first, because the question asked of it is "who links to this broken URL?".
CREATE TABLE link (
    target_id  INTEGER NOT NULL,
    source_id  INTEGER NOT NULL,
    fragment   TEXT    NOT NULL DEFAULT '',
    element    TEXT    NOT NULL,               -- a, img, script, link, redirect, ...
    PRIMARY KEY (target_id, source_id, fragment)
) WITHOUT ROWID;

-- Processes working on a crawl; a lease whose owner is gone is reclaimed.
CREATE TABLE worker (
    token         TEXT    PRIMARY KEY,
    crawl_id      INTEGER NOT NULL REFERENCES crawl (id),
    pid           INTEGER NOT NULL,
    hostname      TEXT    NOT NULL,
    started_at    REAL    NOT NULL,
    heartbeat_at  REAL    NOT NULL
);
