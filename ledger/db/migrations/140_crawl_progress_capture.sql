-- A capture's record in its progress event (docs/internals.md "Inputs and outcomes (round 20)"):
-- crawl_host's "done" event of a captured page may carry the capture's task id, manifest location
-- and manifest summary, so a crawl failed before its level report can still record those pages
-- as captured and admit their archives (ledger.crawl.salvage) instead of marking them skipped.
-- New nullable columns: existing rows untouched.
ALTER TABLE crawl_progress
    ADD COLUMN task_id           uuid,
    ADD COLUMN manifest_location text CHECK (manifest_location IS NULL OR length(manifest_location) <= 2048),
    ADD COLUMN manifest_summary  jsonb,
    ADD CONSTRAINT crawl_progress_capture_check
        CHECK (task_id IS NULL OR status = 'captured'),
    ADD CONSTRAINT crawl_progress_manifest_check
        CHECK ((manifest_location IS NULL AND manifest_summary IS NULL) OR task_id IS NOT NULL);
