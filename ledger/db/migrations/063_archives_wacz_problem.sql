-- Issue 13 item 6: why an archive is not complete, as found by the ledger's own check of the
-- WACZ in S3 (ledger.archive.wacz_check: pages/pages.jsonl, CDXJ index, datapackage.json hashes).
-- Such an archive is registered with wacz_complete = false and this one-line reason; NULL = the
-- check found nothing wrong (or the archive predates the check). The index serves the crawl view
-- (archives of one crawl = correlation_id, the crawl id the flow sends as correlationId).
ALTER TABLE archives ADD COLUMN wacz_problem text;
CREATE INDEX archives_wacz_problem_idx ON archives (correlation_id, id) WHERE wacz_problem IS NOT NULL;
