-- Progress within a level (issue 15 item 6): crawl_host posts one event when a capture of a page
-- starts and one when it ends; the latest event per page is kept. Outcomes stay the level
-- report's business (crawl_pages.state): this table only feeds GET /api/crawls/{id}'s live view.
CREATE TABLE crawl_progress (
    page_id    bigint PRIMARY KEY REFERENCES crawl_pages (id) ON DELETE CASCADE,
    crawl_id   uuid NOT NULL REFERENCES crawls (id) ON DELETE CASCADE,
    depth      integer NOT NULL CHECK (depth >= 0),
    phase      text NOT NULL CHECK (phase IN ('started', 'done')),
    status     text CHECK (status IN ('captured', 'failed')),
    at         timestamptz NOT NULL DEFAULT now(),
    CHECK ((phase = 'done') = (status IS NOT NULL))
);
CREATE INDEX crawl_progress_crawl_id_depth_idx ON crawl_progress (crawl_id, depth);
