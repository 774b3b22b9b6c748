-- Issue 29 item 3 (helper "scope", docs/decisions/173): limits per crawl.
-- time_limit_s: wall-clock seconds from the start (stop reason 'time_limit'); max_bytes: the sum of
-- the crawl's admitted WACZ sizes (stop reason 'size_limit'); max_pages_per_host: pages per host
-- (the host's further links dropped 'max_pages_per_host', as WAGGLE_MAX_PAGES_PER_HOST does for
-- every crawl; the smaller cap wins). NULL: no limit.
-- archives.wacz_bytes: the WACZ's size in the store (HEAD), filled for crawls with max_bytes.
ALTER TABLE crawls ADD COLUMN time_limit_s integer CHECK (time_limit_s >= 1);
ALTER TABLE crawls ADD COLUMN max_bytes bigint CHECK (max_bytes >= 1);
ALTER TABLE crawls ADD COLUMN max_pages_per_host integer CHECK (max_pages_per_host >= 1);
ALTER TABLE archives ADD COLUMN wacz_bytes bigint CHECK (wacz_bytes >= 0);
CREATE INDEX crawls_limited_idx ON crawls (started_at) WHERE state = 'running'
    AND (time_limit_s IS NOT NULL OR max_bytes IS NOT NULL);
CREATE INDEX archives_correlation_idx ON archives (correlation_id);
