-- Issue 12: many crawls at once, each host's politeness shared between them, the ledger as
-- replicas. Keeps every existing row; see docs/internals.md "Concurrent crawls and host leases".

-- Any number of running crawls (a per-organization limit is enforced by POST /api/crawls
-- under an advisory lock per organization, not by an index).
DROP INDEX IF EXISTS crawls_single_active_idx;
CREATE INDEX crawls_running_org_idx ON crawls (org_id) WHERE state = 'running';

-- The dispatch state of the level in flight (current_depth):
--   planned    committed, not yet sent (the level report or start committed it);
--   waiting    every host of the level is leased by another crawl's level;
--   dispatched its hosts are leased to it and the webhook was (being) called.
ALTER TABLE crawls ADD COLUMN level_state text NOT NULL DEFAULT 'planned'
    CHECK (level_state IN ('planned', 'waiting', 'dispatched'));
ALTER TABLE crawls ADD COLUMN level_since timestamptz NOT NULL DEFAULT now();
UPDATE crawls SET level_state = 'dispatched';  -- rows so far were dispatched by the old code
CREATE INDEX crawls_level_waiting_idx ON crawls (level_since) WHERE state = 'running' AND level_state <> 'dispatched';

-- Per-host politeness across crawls: the host's last capture (the time its gap runs from:
-- gapFrom when reported, else finishedAt) and the per-host delay of the crawl that made it.
CREATE TABLE hosts (
    host             text PRIMARY KEY CHECK (host <> ''),
    last_capture_at  timestamptz NOT NULL,
    last_delay_ms    integer NOT NULL CHECK (last_delay_ms >= 0),
    last_crawl_id    uuid,
    updated_at       timestamptz NOT NULL DEFAULT now()
);
INSERT INTO hosts (host, last_capture_at, last_delay_ms, last_crawl_id)
SELECT DISTINCT ON (p.host) p.host, p.finished_at, c.per_host_delay_ms, c.id
FROM crawl_pages p JOIN crawls c ON c.id = p.crawl_id
WHERE p.finished_at IS NOT NULL
ORDER BY p.host, p.finished_at DESC;

-- A host is crawled by at most one level at a time across all crawls: the lease of a host to
-- the level (crawl_id, depth) that captures it. A lease lives while its crawl is running at
-- that level (trigger below) and until expires_at (the lease loop cancels the job, then drops it).
CREATE TABLE host_leases (
    host        text PRIMARY KEY CHECK (host <> ''),
    crawl_id    uuid NOT NULL REFERENCES crawls (id) ON DELETE CASCADE,
    depth       integer NOT NULL CHECK (depth >= 0),
    job_id      text,
    leased_at   timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL
);
CREATE INDEX host_leases_crawl_idx ON host_leases (crawl_id, depth);
CREATE INDEX host_leases_expires_idx ON host_leases (expires_at);

-- Crawls that found a host leased elsewhere and carried its pages on: while one waits, a crawl
-- that does not wait for the host cannot lease it (no crawl starves behind a host another
-- keeps re-leasing level after level).
CREATE TABLE host_waits (
    host      text NOT NULL CHECK (host <> ''),
    crawl_id  uuid NOT NULL REFERENCES crawls (id) ON DELETE CASCADE,
    since     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (host, crawl_id)
);
CREATE INDEX host_waits_crawl_idx ON host_waits (crawl_id);

-- Leases end with their level: when the crawl leaves 'running' or moves to another level
-- (the level report), whichever code path did it (report, watchdog, flow failure, dispatch
-- failure). A crawl that is no longer running waits for nothing. A crawl closed while its
-- level held hosts (no report: the job was cancelled, failed or stalled) may have captured on
-- them until now, so each such host's gap runs from now, with this crawl's delay.
CREATE FUNCTION waggle_release_leases() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state <> 'running' THEN
        INSERT INTO hosts AS h (host, last_capture_at, last_delay_ms, last_crawl_id)
        SELECT l.host, now(), NEW.per_host_delay_ms, NEW.id FROM host_leases l
        WHERE l.crawl_id = NEW.id AND l.depth = OLD.current_depth AND OLD.level_state = 'dispatched'
          AND OLD.state = 'running' AND NEW.current_depth = OLD.current_depth
        ORDER BY l.host
        ON CONFLICT (host) DO UPDATE SET last_capture_at = EXCLUDED.last_capture_at,
            last_delay_ms = greatest(h.last_delay_ms, EXCLUDED.last_delay_ms),
            last_crawl_id = EXCLUDED.last_crawl_id, updated_at = now()
        WHERE h.last_capture_at < EXCLUDED.last_capture_at;
        DELETE FROM host_waits WHERE crawl_id = NEW.id;
    END IF;
    DELETE FROM host_leases WHERE crawl_id = NEW.id AND (NEW.state <> 'running' OR depth <> NEW.current_depth);
    RETURN NULL;
END $$;
CREATE TRIGGER crawls_release_leases AFTER UPDATE OF state, current_depth ON crawls
    FOR EACH ROW WHEN (NEW.state IS DISTINCT FROM OLD.state OR NEW.current_depth IS DISTINCT FROM OLD.current_depth)
    EXECUTE FUNCTION waggle_release_leases();

-- Ledger processes sharing this database (heartbeat every few seconds; `GET /api/health` and
-- `waggle dev status` list the ones seen lately).
CREATE TABLE ledger_replicas (
    id          text PRIMARY KEY,  -- hostname:pid
    started_at  timestamptz NOT NULL DEFAULT now(),
    seen_at     timestamptz NOT NULL DEFAULT now()
);
