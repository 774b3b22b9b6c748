-- Within one crawl (issue 27 item 1, decision 321): the (URL, payload digest) pairs the crawl's
-- admitted, complete archives hold — 200 responses and revisits from their CDXJ index, and the
-- behavior sources they store (urn:behavior:<id>, sha256:<hex>). A later capture of the same
-- crawl leaves such a sub-resource out of its WACZ; replay finds it in the crawl's collection.
CREATE TABLE crawl_resources (
    crawl_id    uuid NOT NULL REFERENCES crawls (id) ON DELETE CASCADE,
    uri         text NOT NULL,
    digest      text NOT NULL,          -- normal form (ledger.archive.digests.normal)
    archive_id  uuid NOT NULL REFERENCES archives (id) ON DELETE CASCADE,
    PRIMARY KEY (crawl_id, uri, digest)
);
CREATE INDEX crawl_resources_archive_idx ON crawl_resources (archive_id);
