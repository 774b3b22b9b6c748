-- Issue 24 item 8 (decision 232): per page, the links it gave and their fates:
-- {"discovered": n, "kept": n, "dropped": {reason: n}}; NULL for a page that gave no links
-- (or was reported before this column existed).
ALTER TABLE crawl_pages ADD COLUMN IF NOT EXISTS links jsonb
    CHECK (links IS NULL OR jsonb_typeof(links) = 'object');
