-- Issue 27 item 3 (helper "changes", docs/decisions/211-what-changed-between-two-crawls.md): the
-- main document of each admitted archive as its CDXJ index names it, read once from S3 the first
-- time a changes view needs it (ledger.archive.main_document) and kept: an archive is immutable.
-- A row with digest NULL: read, and the index names no record of the page's URL (said as unknown).
CREATE TABLE archive_main_documents (
    archive_id   uuid PRIMARY KEY REFERENCES archives (id) ON DELETE CASCADE,
    url          text NOT NULL,          -- the URL looked up (the page's final URL, else its URL)
    digest       text,                   -- WARC-Payload-Digest in ledger.archive.digests.normal form
    http_status  integer,
    revisit      boolean NOT NULL DEFAULT false,  -- the record is a revisit (its body is an original's)
    read_at      timestamptz NOT NULL DEFAULT now()
);
