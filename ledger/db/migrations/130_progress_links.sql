-- Issue 14, fourth round (docs/internals.md "Links from progress"): a captured page's "done"
-- progress event may carry the page's links; the ledger puts them into the frontier during the
-- level and records here the SHA-256 of the links it applied (ledger.crawl.report_early.digest).
-- The level report skips a result whose links have that digest (they are in already) and
-- applies the rest. NULL: nothing landed from this page's progress. Nullable: rows untouched.
-- crawl_pages.from_progress marks the rows inserted that way (true from the insert on; the
-- report of the level before them reads them as "new for this level"); a constant default: no
-- table rewrite.
ALTER TABLE crawl_pages ADD COLUMN from_progress boolean NOT NULL DEFAULT false;
ALTER TABLE crawl_progress ADD COLUMN links_sha256 bytea CHECK (links_sha256 IS NULL OR length(links_sha256) = 32);
