-- waggle ledger schema: the final shape of reference/ledger.md §10, plus the columns waggle
-- adds beyond upstream (idempotent level reports, level in flight, drop counters, progress
-- time for the watchdog). Applied once by `waggle db migrate`, recorded in schema_migrations.

-- SHA-256 over the UTF-8 bytes of a text. convert_to() is only STABLE, but with a fixed target
-- encoding the result never changes, so the wrapper may be IMMUTABLE (needed by generated columns).
CREATE FUNCTION waggle_sha256(value text) RETURNS bytea
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT sha256(convert_to(value, 'UTF8')) $$;

-- Saved seed URLs of an organization (`waggle targets …`, `fromTargets` crawls).
CREATE TABLE capture_targets (
    id          bigserial PRIMARY KEY,
    url         text NOT NULL CHECK (url <> '' AND url = btrim(url)),
    url_hash    bytea GENERATED ALWAYS AS (waggle_sha256(url)) STORED,
    labels      text[] NOT NULL DEFAULT '{}',
    enabled     boolean NOT NULL DEFAULT true,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    org_id      text NOT NULL CHECK (org_id <> ''),
    CONSTRAINT capture_targets_url_http_check CHECK (url ~* '^https?://')
);
CREATE UNIQUE INDEX capture_targets_org_url_hash_key ON capture_targets (org_id, url_hash);
CREATE INDEX capture_targets_enabled_id_idx ON capture_targets (id) WHERE enabled;

-- Admitted WACZ archives. No owner/org column on purpose: who may read is held only by OpenFGA.
CREATE TABLE archives (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    task_id         uuid NOT NULL,
    correlation_id  text,
    bucket          text NOT NULL,
    object_key      text NOT NULL,
    source_url      text NOT NULL,
    labels          text[] NOT NULL DEFAULT '{}',
    wacz_complete   boolean,
    captured_at     timestamptz NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    signed          boolean,
    indexed_at      timestamptz,
    CONSTRAINT archives_bucket_object_key_key UNIQUE (bucket, object_key)
);
CREATE INDEX archives_task_id_idx ON archives (task_id);
CREATE INDEX archives_captured_at_idx ON archives (captured_at DESC);
CREATE INDEX archives_unindexed_idx ON archives (id) WHERE indexed_at IS NULL;

-- Transactional outbox of OpenFGA writes, delivered by the outbox worker.
CREATE TABLE fga_outbox (
    id            bigserial PRIMARY KEY,
    payload       jsonb NOT NULL CHECK (jsonb_typeof(payload) = 'object'),
    created_at    timestamptz NOT NULL DEFAULT now(),
    processed_at  timestamptz,
    attempts      integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    last_error    text
);
CREATE INDEX fga_outbox_pending_idx ON fga_outbox (id) WHERE processed_at IS NULL;

-- Every reported capture that had a BrowserHive task id (failures too): the reconciler's input.
CREATE TABLE capture_submissions (
    task_id         uuid PRIMARY KEY,
    correlation_id  text,
    org_id          text NOT NULL,
    submitted_by    text,
    submitted_at    timestamptz NOT NULL DEFAULT now(),
    manifest_key    text,
    manifest_error  text
);
CREATE INDEX capture_submissions_submitted_at_idx ON capture_submissions (submitted_at);

-- Crawls. At most one is running in the whole table (crawls_single_active_idx).
CREATE TABLE crawls (
    id                   uuid PRIMARY KEY,
    seeds                text[] NOT NULL,
    scope                text NOT NULL CHECK (scope IN ('same-origin', 'same-host')),
    max_depth            integer NOT NULL CHECK (max_depth BETWEEN 0 AND 10),
    max_pages            integer NOT NULL CHECK (max_pages >= 1),
    per_host_delay_ms    integer NOT NULL CHECK (per_host_delay_ms BETWEEN 0 AND 600000),
    host_parallelism     integer NOT NULL CHECK (host_parallelism BETWEEN 1 AND 32),
    org_id               text NOT NULL,
    requested_by         text NOT NULL,
    state                text NOT NULL DEFAULT 'running'
                         CHECK (state IN ('running', 'succeeded', 'failed')),
    stop_reason          text CHECK (stop_reason IN ('completed', 'max_depth', 'max_pages', 'failed')),
    started_at           timestamptz NOT NULL DEFAULT now(),
    finished_at          timestamptz,
    pages_discovered     integer NOT NULL DEFAULT 0,
    pages_captured       integer NOT NULL DEFAULT 0,
    error                text,
    artifact_key_prefix  text,
    last_job_id          text,
    last_job_depth       integer,
    scripts              jsonb NOT NULL DEFAULT '[]',
    -- beyond upstream --------------------------------------------------------------------
    current_depth        integer NOT NULL DEFAULT 0 CHECK (current_depth >= 0), -- level in flight
    drops                jsonb NOT NULL DEFAULT '{}', -- {reason: count} of links not followed
    last_progress_at     timestamptz NOT NULL DEFAULT now(), -- watchdog: last report/dispatch
    CONSTRAINT crawls_seeds_not_empty CHECK (array_length(seeds, 1) >= 1),
    CONSTRAINT crawls_scripts_array CHECK (jsonb_typeof(scripts) = 'array'),
    CONSTRAINT crawls_drops_object CHECK (jsonb_typeof(drops) = 'object'),
    CONSTRAINT crawls_finished_state CHECK ((state = 'running') = (finished_at IS NULL))
);
CREATE UNIQUE INDEX crawls_single_active_idx ON crawls ((true)) WHERE state = 'running';
CREATE INDEX crawls_started_at_idx ON crawls (started_at);

-- Pages of a crawl. url = the URL requested (as discovered, minus the fragment);
-- url_key = its WHATWG-normalized dedup key; the unique hash is the only cross-level dedup.
CREATE TABLE crawl_pages (
    id               bigserial PRIMARY KEY,
    crawl_id         uuid NOT NULL REFERENCES crawls (id) ON DELETE CASCADE,
    url              text NOT NULL CHECK (url <> '' AND url = btrim(url)),
    url_key          text NOT NULL CHECK (url_key <> ''),
    url_hash         bytea GENERATED ALWAYS AS (waggle_sha256(url_key)) STORED,
    depth            integer NOT NULL CHECK (depth >= 0),
    host             text NOT NULL,
    state            text NOT NULL DEFAULT 'pending'
                     CHECK (state IN ('pending', 'captured', 'failed', 'skipped')),
    skip_reason      text,
    task_id          text,
    correlation_id   text,
    discovered_from  bigint REFERENCES crawl_pages (id),
    submitted_at     timestamptz,
    finished_at      timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX crawl_pages_crawl_id_url_hash_key ON crawl_pages (crawl_id, url_hash);
CREATE INDEX crawl_pages_crawl_id_depth_idx ON crawl_pages (crawl_id, depth);
CREATE INDEX crawl_pages_crawl_id_host_idx ON crawl_pages (crawl_id, host, submitted_at);

-- Accepted level reports: one per (crawl, depth). An identical re-send gets the stored answer;
-- a different report for a recorded depth is refused (beyond upstream).
CREATE TABLE crawl_level_reports (
    crawl_id       uuid NOT NULL REFERENCES crawls (id) ON DELETE CASCADE,
    depth          integer NOT NULL CHECK (depth >= 0),
    report_sha256  text NOT NULL CHECK (report_sha256 ~ '^[0-9a-f]{64}$'),
    answer         jsonb NOT NULL CHECK (jsonb_typeof(answer) = 'object'),
    accepted_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (crawl_id, depth)
);

-- Page-script catalogue: versions are appended, never edited; sha256 is over the TypeScript.
CREATE TABLE scripts (
    id          text NOT NULL CHECK (id <> '' AND id = btrim(id) AND id ~ '^[a-z][a-z0-9-]{0,63}$'),
    version     integer NOT NULL CHECK (version > 0),
    phase       text NOT NULL CHECK (phase IN ('preload', 'behavior')),
    source      text NOT NULL CHECK (source <> ''),
    sha256      text GENERATED ALWAYS AS (encode(waggle_sha256(source), 'hex')) STORED,
    options     jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(options) = 'object'),
    enabled     boolean NOT NULL DEFAULT true,
    created_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT scripts_pkey PRIMARY KEY (id, version)
);
CREATE INDEX scripts_enabled_id_version_idx ON scripts (id, version) WHERE enabled;
