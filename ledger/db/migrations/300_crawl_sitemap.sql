-- Issue 29 item 2 (helper "sitemaps", docs/decisions/221): a crawl that reads its seed hosts'
-- sitemaps (use_sitemap), optionally keeping only URLs whose lastmod is after a moment
-- (sitemap_lastmod_after), and what the sitemaps gave (sitemap_counts: {files, found, older,
-- queued, outOfScope, notQueued, notes}; NULL until a level report carries sitemaps).
ALTER TABLE crawls ADD COLUMN use_sitemap boolean NOT NULL DEFAULT false;
ALTER TABLE crawls ADD COLUMN sitemap_lastmod_after timestamptz;
ALTER TABLE crawls ADD COLUMN sitemap_counts jsonb;
