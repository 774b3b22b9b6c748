-- Issue 24 item 5 (helper "robots"): a capture's "sealed" progress event gives its task id and
-- the manifest location it will write while the page is still 'started', so a crawl failed
-- before the capture answers (its flow job cancelled) still admits it (ledger.crawl.salvage).
ALTER TABLE crawl_progress DROP CONSTRAINT crawl_progress_capture_check;
ALTER TABLE crawl_progress ADD CONSTRAINT crawl_progress_capture_check
    CHECK (task_id IS NULL OR status = 'captured' OR phase = 'started');
