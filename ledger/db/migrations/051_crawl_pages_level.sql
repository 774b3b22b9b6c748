-- Issue 12: the level that captures a page. NULL = its depth (every page until now). A page of
-- a host leased to another crawl's level is carried: level = the crawl's next level, while
-- depth keeps its link distance from the seeds (maxDepth and its links' depth come from it).
ALTER TABLE crawl_pages ADD COLUMN level integer CHECK (level IS NULL OR level >= depth);
CREATE INDEX crawl_pages_crawl_id_level_idx ON crawl_pages (crawl_id, (coalesce(level, depth))) WHERE state = 'pending';
