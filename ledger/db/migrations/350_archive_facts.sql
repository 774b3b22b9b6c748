-- Issue 25 item 5 honesty (helper "collection", docs/decisions/341-archive-facts-at-admission.md):
-- what an admitted archive holds, read at admission from the WACZ the ledger checks anyway (its
-- size from the HEAD, the central directory, pages/pages.jsonl, the CDXJ index), so the archives
-- list and the pages list say size and title from the start. Old archives get their row lazily
-- the first time a list shows them (ledger.archive.facts.backfill). A row = read; NULL in a
-- column = the archive does not say (wacz_bytes NULL: the object was missing when read).
CREATE TABLE archive_facts (
    archive_id           uuid PRIMARY KEY REFERENCES archives (id) ON DELETE CASCADE,
    wacz_bytes           bigint CHECK (wacz_bytes >= 0),
    title                text,           -- pages/pages.jsonl, first page
    url                  text,           -- the page URL its main document was looked up by
    http_status          integer,        -- the main document's CDXJ line
    content_type         text,           -- its mime; NULL for a revisit (the original's is read)
    revisit              boolean NOT NULL DEFAULT false,  -- the main document is a revisit record
    digest               text,           -- its payload digest (ledger.archive.digests normal form)
    original_archive_id  uuid REFERENCES archives (id) ON DELETE SET NULL,  -- a revisit's original
    read_at              timestamptz NOT NULL DEFAULT now()
);
