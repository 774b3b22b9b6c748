-- A crawl's resource another capture of the crawl left out (decision 421): its archive must be
-- searched by the player even when replay opens straight at a page that left it out, so the
-- crawl's collection names such archives in preloadResources. Set by the /digests lookup when it
-- answers a pair "written".
ALTER TABLE crawl_resources ADD COLUMN shared boolean NOT NULL DEFAULT false;
CREATE INDEX crawl_resources_shared_idx ON crawl_resources (crawl_id) WHERE shared;
