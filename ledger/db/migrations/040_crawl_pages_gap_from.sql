-- Issue 11: the moment crawl_host started the host's gap from (PageResult gapFrom: the page's
-- last request where the capture answer said when it ended, else the capture's completion).
-- NULL for rows reported before this column existed: readers use coalesce(gap_from, finished_at).
ALTER TABLE crawl_pages ADD COLUMN IF NOT EXISTS gap_from timestamptz;
ALTER TABLE crawl_pages ADD CONSTRAINT crawl_pages_gap_from_within_capture
    CHECK (gap_from IS NULL OR submitted_at IS NULL OR finished_at IS NULL
           OR (gap_from >= submitted_at AND gap_from <= finished_at));
