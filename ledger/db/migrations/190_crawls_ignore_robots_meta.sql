-- Issue 24 item 7, helper "wishes": a crawl may ignore the site's robots meta and X-Robots-Tag
-- (POST /api/crawls `ignoreRobotsMeta`, `waggle crawl --ignore-robots-meta`). false (the default,
-- and every crawl before this column): a page saying noarchive is not archived (failure class
-- policy), a page saying nofollow has its links dropped with reason nofollow.
ALTER TABLE crawls ADD COLUMN ignore_robots_meta boolean NOT NULL DEFAULT false;
