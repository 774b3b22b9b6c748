-- Issue 25 (helper "collection"): a crawl replayed as one collection (docs/decisions/151).
-- archive_files: each admitted WACZ's size and SHA-256, as read once from S3 by the ledger the
-- first time a collection lists the archive (ledger.archive.files); the multi-WACZ JSON names each
-- member by them. A row exists only for a measured archive: no row = not measured yet.
-- What is in it, read in the same pass (issue 25 item 5; NULL = the archive does not say):
-- the page's title (pages/pages.jsonl), its HTTP status and content type (the CDXJ line of
-- the page's URL), and the screenshot the capture wrote beside it (the manifest's
-- artifacts.webp or .png: bucket and key).
CREATE TABLE archive_files (
    archive_id         uuid PRIMARY KEY REFERENCES archives (id) ON DELETE CASCADE,
    bytes              bigint NOT NULL CHECK (bytes >= 0),
    sha256             text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    title              text,
    http_status        integer,
    content_type       text,
    screenshot_bucket  text,
    screenshot_key     text,
    measured_at        timestamptz NOT NULL DEFAULT now()
);

-- collection_tickets: a read-only capability for one crawl's collection JSON, for the replay
-- origin's service worker (no session is honoured there). The token is stored only as its
-- SHA-256; the identity is the one that asked for it, and every use asks OpenFGA again.
CREATE TABLE collection_tickets (
    token_hash     bytea PRIMARY KEY CHECK (length(token_hash) = 32),
    crawl_id       uuid NOT NULL REFERENCES crawls (id) ON DELETE CASCADE,
    subject        text NOT NULL CHECK (subject <> ''),
    organizations  text[] NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    expires_at     timestamptz NOT NULL
);
CREATE INDEX collection_tickets_expires_at_idx ON collection_tickets (expires_at);
