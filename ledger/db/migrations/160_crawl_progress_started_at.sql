-- When a page's capture started, as the ledger received its "started" progress event (round 22,
-- helper "polish"): the "done" event replaces the row's phase and time, so the start was lost and
-- a page salvaged from its events after a failed level (ledger.crawl.salvage) had no capture time.
-- Set by the "started" insert and kept by the "done" update; NULL for rows from before, and for a
-- page whose "done" came without a "started" (its capture time stays unknown).
ALTER TABLE crawl_progress ADD COLUMN started_at timestamptz;
