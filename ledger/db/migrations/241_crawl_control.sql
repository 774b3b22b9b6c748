-- Issue 29 item 4 (helper "scope", docs/decisions/172): stop, pause, resume.
-- * stop ends a crawl 'succeeded' with stop reason 'stopped' (fail stays for what went wrong);
-- * 'paused': the frontier kept, no level in flight, no host leases (the release trigger of
--   migration 050 runs on leaving 'running'); not finished, so finished_at stays NULL;
-- * pause_requested: asked while a level was in flight; its level report pauses the crawl
--   instead of dispatching the next level.
-- Stop reasons of the limits (item 3): 'time_limit', 'size_limit'.
ALTER TABLE crawls DROP CONSTRAINT IF EXISTS crawls_state_check;
ALTER TABLE crawls ADD CONSTRAINT crawls_state_check CHECK (state IN ('running', 'paused', 'succeeded', 'failed'));
ALTER TABLE crawls DROP CONSTRAINT IF EXISTS crawls_stop_reason_check;
ALTER TABLE crawls ADD CONSTRAINT crawls_stop_reason_check
    CHECK (stop_reason IN ('completed', 'max_depth', 'max_pages', 'failed', 'stopped', 'time_limit', 'size_limit'));
ALTER TABLE crawls DROP CONSTRAINT IF EXISTS crawls_finished_state;
ALTER TABLE crawls ADD CONSTRAINT crawls_finished_state CHECK ((state IN ('running', 'paused')) = (finished_at IS NULL));
ALTER TABLE crawls ADD COLUMN pause_requested boolean NOT NULL DEFAULT false;
ALTER TABLE crawls ADD COLUMN paused_at timestamptz;
