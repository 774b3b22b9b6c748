-- Frontier dedup stays on the unique (crawl_id, url_hash) index (issue 14: the measured
-- alternatives were not faster), and becomes exact: url_hash is no longer generated, so a
-- distinct URL whose SHA-256 collides with a held one is stored under the next hash of its
-- probe chain (ledger.crawl.frontier.probe_hash) instead of being dropped. The ledger passes
-- url_hash itself on the level report's insert (no per-row hashing in SQL); any INSERT that
-- leaves it out gets sha256(url_key), the old generated value, from the trigger below.
-- Existing rows keep their values (DROP EXPRESSION keeps the stored data).
ALTER TABLE crawl_pages ALTER COLUMN url_hash DROP EXPRESSION;

CREATE FUNCTION waggle_crawl_pages_url_hash() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    NEW.url_hash := waggle_sha256(NEW.url_key);
    RETURN NEW;
END $$;

CREATE TRIGGER crawl_pages_url_hash BEFORE INSERT ON crawl_pages
    FOR EACH ROW WHEN (NEW.url_hash IS NULL) EXECUTE FUNCTION waggle_crawl_pages_url_hash();

ALTER TABLE crawl_pages ALTER COLUMN url_hash SET NOT NULL;
