-- Issue 29 item 5 (decision 231): a host that answered with challenge or block pages is paused
-- for the rest of its crawl. Its pages are 'blocked' with the reason (a new page state), and the
-- host is remembered per crawl so that its pages of later levels are never dispatched.
ALTER TABLE crawl_pages DROP CONSTRAINT IF EXISTS crawl_pages_state_check;
ALTER TABLE crawl_pages ADD CONSTRAINT crawl_pages_state_check
    CHECK (state IN ('pending', 'captured', 'failed', 'skipped', 'blocked'));

CREATE TABLE IF NOT EXISTS crawl_blocked_hosts (
    crawl_id    uuid NOT NULL REFERENCES crawls (id) ON DELETE CASCADE,
    host        text NOT NULL,
    reason      text NOT NULL CHECK (reason <> ''),
    depth       integer NOT NULL CHECK (depth >= 0),   -- the level whose report paused it
    blocked_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (crawl_id, host)
);
