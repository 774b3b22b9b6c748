-- Issue 24 item 6: whether a crawl asked for signed WACZ (POST /api/crawls `signing`,
-- `waggle crawl --sign`, the web form). NULL = the deployment's WAGGLE_CAPTURE_SIGNING
-- (every crawl before this column).
ALTER TABLE crawls ADD COLUMN IF NOT EXISTS signing boolean;
