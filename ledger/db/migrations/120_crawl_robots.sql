-- robots.txt read once per crawl per host (docs/internals.md "robots.txt cache"): the latest
-- outcome plan_level fetched for each (crawl, host), from the level report's optional robots
-- field. The next level's dispatch sends the young ones (WAGGLE_ROBOTS_CACHE_TTL_S) to the flow,
-- which then does not fetch that host's robots.txt again. New table: existing data untouched.
CREATE TABLE crawl_robots (
    crawl_id    uuid NOT NULL REFERENCES crawls (id) ON DELETE CASCADE,
    host        text NOT NULL,
    fetched_at  timestamptz NOT NULL,
    state       text NOT NULL CHECK (state IN ('allowed', 'unavailable', 'unreachable')),
    body        text CHECK (body IS NULL OR length(body) <= 524288),
    depth       integer NOT NULL CHECK (depth >= 0),  -- the level whose report carried it
    recorded_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (crawl_id, host),
    CHECK ((state = 'allowed') = (body IS NOT NULL))
);
