-- Conditional requests for recrawls (issue 27 item 4, docs/decisions/331-conditional-requests.md):
-- the validators (ETag / Last-Modified) of each admitted archive's main document and its payload
-- digest, as the capture server reported them (datapackage browserhive:capture.conditional),
-- kept at admission. The next crawl of the same organization asks by (org_id, url); the original
-- is found through payload_digests (same organization), never across organizations.
CREATE TABLE document_validators (
    archive_id    uuid PRIMARY KEY REFERENCES archives (id) ON DELETE CASCADE,
    org_id        text NOT NULL,
    url           text NOT NULL,        -- the page URL the capture was asked for
    etag          text,
    last_modified text,
    digest        text NOT NULL,        -- the main document's payload digest (digests.normal form)
    captured_at   timestamptz NOT NULL DEFAULT now(),
    CHECK (etag IS NOT NULL OR last_modified IS NOT NULL)
);
CREATE INDEX document_validators_lookup_idx ON document_validators (org_id, url, captured_at DESC);
