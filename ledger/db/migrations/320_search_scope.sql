-- Issue 26 at 1,000,000 pages (helper "search", docs/decisions/311-search-at-a-million-pages.md).
-- archive_text carries what the query's candidate set and its order need, so Postgres can walk
-- one organization's (or crawl's, or host's) matches newest first and stop, instead of ranking
-- every match of a common word:
-- * org_id: the organization of the archive's crawl (crawls.org_id) or, without a crawl, of
--   its capture submission. A candidate filter only, never an authorization: every hit shown
--   is still confirmed by OpenFGA in the request (the same organization OpenFGA holds as the
--   capture job's parent; NULL when neither is known — then found only through grants).
ALTER TABLE archive_text ADD COLUMN org_id text;
UPDATE archive_text t SET org_id = COALESCE(
    (SELECT c.org_id FROM crawls c WHERE c.id = t.crawl_id),
    (SELECT s.org_id FROM archives a JOIN capture_submissions s ON s.task_id = a.task_id WHERE a.id = t.archive_id));

-- Newest-first walks per organization, crawl and host; the single-column b-trees they replace
-- answered only equality (a common word then sorted all of its matches).
CREATE INDEX archive_text_org_captured_idx ON archive_text (org_id, captured_at DESC);
CREATE INDEX archive_text_crawl_captured_idx ON archive_text (crawl_id, captured_at DESC);
CREATE INDEX archive_text_host_captured_idx ON archive_text (host, captured_at DESC);
DROP INDEX IF EXISTS archive_text_crawl_idx;
DROP INDEX IF EXISTS archive_text_host_idx;
