-- Revisit records (issue 27 item 1, decision 181): the payload digests each organization has
-- already archived, filled at admission from the admitted WACZ's CDXJ index (response records
-- only), first capture per (organization, digest) kept. Never read across organizations: the
-- key starts with org_id and every query names it.
CREATE TABLE payload_digests (
    org_id      text NOT NULL,
    digest      text NOT NULL,          -- WARC-Payload-Digest as written (sha256:BASE32 / sha1:…)
    uri         text NOT NULL,          -- WARC-Target-URI of the original response
    captured_at timestamptz NOT NULL,   -- its WARC-Date (CDXJ timestamp, second precision)
    archive_id  uuid NOT NULL REFERENCES archives (id) ON DELETE CASCADE,
    PRIMARY KEY (org_id, digest)
);
CREATE INDEX payload_digests_archive_idx ON payload_digests (archive_id);

-- The revisit records of each archive: which digest each one refers to (the collection of a
-- recrawl must include the archives holding those originals), and what the archive saved.
CREATE TABLE archive_revisits (
    archive_id  uuid NOT NULL REFERENCES archives (id) ON DELETE CASCADE,
    digest      text NOT NULL,
    PRIMARY KEY (archive_id, digest)
);
ALTER TABLE archives ADD COLUMN revisit_count integer NOT NULL DEFAULT 0 CHECK (revisit_count >= 0);
ALTER TABLE archives ADD COLUMN revisit_bytes_saved bigint NOT NULL DEFAULT 0 CHECK (revisit_bytes_saved >= 0);
