-- Issue 13 item 3 (contract 4): where a page's main document ended after HTTP or JavaScript
-- redirects. final_url = the level report's finalUrl as received (validated: an absolute
-- http(s) URL); final_url_key = its dedup key, set only when it differs from the page's own
-- url_key, so the crawl treats the final URL as known (a later link to it is not captured
-- again). Existing rows keep NULL (no redirect recorded).
ALTER TABLE crawl_pages ADD COLUMN final_url text CHECK (final_url IS NULL OR final_url <> '');
ALTER TABLE crawl_pages ADD COLUMN final_url_key text;
ALTER TABLE crawl_pages ADD COLUMN final_url_hash bytea GENERATED ALWAYS AS (waggle_sha256(final_url_key)) STORED;
CREATE INDEX crawl_pages_final_url_hash_idx ON crawl_pages (crawl_id, final_url_hash)
    WHERE final_url_hash IS NOT NULL;
