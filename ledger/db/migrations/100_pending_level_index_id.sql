-- Issue 14: the pending pages of one level, in id order, straight from the index. The level
-- report reads only the pages carried to the next level (ids up to the largest before the
-- report inserted anything: ledger.crawl.leases.carried_pages), and the level's dispatch reads
-- its pages ORDER BY id; with id as the last key column both are an index range in order
-- instead of every pending row of the level plus a sort. Index only: no row changes.
CREATE INDEX crawl_pages_pending_level_id_idx
    ON crawl_pages (crawl_id, (coalesce(level, depth)), id) WHERE state = 'pending';
DROP INDEX crawl_pages_crawl_id_level_idx;
