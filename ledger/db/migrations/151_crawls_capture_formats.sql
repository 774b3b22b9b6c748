-- Round 21, helper "deadline": the capture formats a crawl asked for (POST /api/crawls `formats`,
-- `waggle crawl --formats`, the web form), e.g. {wacz,png}. NULL = the deployment's
-- WAGGLE_CAPTURE_FORMATS (every crawl before this column). `links` is still forced on for a level
-- that another level follows (ledger.crawl.dispatch.capture_formats).
ALTER TABLE crawls ADD COLUMN capture_formats text[];
