-- Issue 13 item 5 (traps): what a crawl holds per URL shape, so the parameter-trap rules
-- (ledger.crawl.param_traps) can count across levels without reading every page of a crawl.
-- kind 'path'    : shape = key without its query; variants = distinct queries held there
-- kind 'walk'    : shape = digit-masked query (/cal?m=#&y=#); depths = levels holding it
-- kind 'session' : shape = a session page's key without its session parameters
-- Rows appear as levels are planned; a crawl started before this migration counts from its
-- next level on (nothing to backfill: the rules only look back, and start from zero).
CREATE TABLE crawl_url_shapes (
    crawl_id    uuid NOT NULL REFERENCES crawls (id) ON DELETE CASCADE,
    kind        text NOT NULL CHECK (kind IN ('path', 'walk', 'session')),
    shape       text NOT NULL,
    shape_hash  bytea GENERATED ALWAYS AS (waggle_sha256(shape)) STORED,
    variants    integer NOT NULL DEFAULT 0 CHECK (variants >= 0),
    depths      integer[] NOT NULL DEFAULT '{}',
    PRIMARY KEY (crawl_id, kind, shape_hash)
);
