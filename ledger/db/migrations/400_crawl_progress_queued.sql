-- Decision 401 (helper "polish"): a capture submitted held behind the host's loading page
-- (extension holdAfter) is "queued" until that page sealed: nothing of it reaches the site
-- before, so the live progress must not list it as capturing beside the page it waits for.
ALTER TABLE crawl_progress DROP CONSTRAINT crawl_progress_phase_check;
ALTER TABLE crawl_progress ADD CONSTRAINT crawl_progress_phase_check
    CHECK (phase IN ('queued', 'started', 'done'));
