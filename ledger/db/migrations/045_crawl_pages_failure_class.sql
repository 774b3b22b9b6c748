-- Issue 17: the class of a failed (or skipped) page, from what happened: transient (retried
-- once by crawl_host), permanent, policy. NULL for captured and pending pages and for rows
-- reported before this column existed.
ALTER TABLE crawl_pages ADD COLUMN IF NOT EXISTS failure_class text;
ALTER TABLE crawl_pages ADD CONSTRAINT crawl_pages_failure_class_known
    CHECK (failure_class IS NULL OR failure_class IN ('transient', 'permanent', 'policy'));
