-- Issue 24 item 7 (helper "robots"): the path_walk trap rule (ledger.crawl.param_traps) counts
-- the levels holding each path-walk shape (the key with numeric path segments masked,
-- https://h/cal/#/#/#/) in crawl_url_shapes, as kind 'walk' does for queries.
ALTER TABLE crawl_url_shapes DROP CONSTRAINT crawl_url_shapes_kind_check;
ALTER TABLE crawl_url_shapes ADD CONSTRAINT crawl_url_shapes_kind_check
    CHECK (kind IN ('path', 'walk', 'session', 'path_walk'));
