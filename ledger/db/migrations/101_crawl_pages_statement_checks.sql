-- Issue 14: the foreign keys of crawl_pages were checked row by row: a level report inserting
-- 90,000 frontier rows ran 90,000 lookups of its own crawl (0.3 s of the insert) and 90,000
-- calls of the never-used discovered_from check (0.05 s). The same guarantees, per statement:
--   * crawl_id: an INSERT whose rows name a crawl that does not exist fails
--     (foreign_key_violation), checked once per distinct crawl of the statement,
--     which also takes the FOR KEY SHARE lock the foreign key took, so the crawl cannot be
--     deleted before the transaction ends; deleting a crawl still deletes its pages (the
--     cascade, now a trigger on crawls); crawl_id cannot be updated (nothing did).
--   * discovered_from: never written by the ledger (always NULL); kept NULL by a CHECK so a
--     dangling reference cannot appear without this migration being revisited.
-- Existing rows are unchanged (they satisfied the old keys).
ALTER TABLE crawl_pages DROP CONSTRAINT crawl_pages_crawl_id_fkey;
ALTER TABLE crawl_pages DROP CONSTRAINT crawl_pages_discovered_from_fkey;
ALTER TABLE crawl_pages ADD CONSTRAINT crawl_pages_discovered_from_unused CHECK (discovered_from IS NULL) NOT VALID;
ALTER TABLE crawl_pages VALIDATE CONSTRAINT crawl_pages_discovered_from_unused;

CREATE FUNCTION waggle_crawl_pages_crawl_exists() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    missing uuid;
BEGIN
    SELECT n.crawl_id INTO missing
    FROM (SELECT DISTINCT crawl_id FROM new_pages) n
    LEFT JOIN LATERAL (SELECT c.id FROM crawls c WHERE c.id = n.crawl_id FOR KEY SHARE) c ON true
    WHERE c.id IS NULL
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'insert or update on table "crawl_pages" violates foreign key constraint "crawl_pages_crawl_id_fkey"'
            USING ERRCODE = 'foreign_key_violation', DETAIL = format('Key (crawl_id)=(%s) is not present in table "crawls".', missing),
                  TABLE = 'crawl_pages', CONSTRAINT = 'crawl_pages_crawl_id_fkey';
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER crawl_pages_crawl_exists_ins AFTER INSERT ON crawl_pages
    REFERENCING NEW TABLE AS new_pages FOR EACH STATEMENT EXECUTE FUNCTION waggle_crawl_pages_crawl_exists();

-- a page never moves to another crawl (the old key allowed it to an existing crawl; nothing did)
CREATE FUNCTION waggle_crawl_pages_crawl_fixed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'crawl_pages.crawl_id cannot change (page %)', OLD.id USING ERRCODE = 'foreign_key_violation';
END $$;

CREATE TRIGGER crawl_pages_crawl_fixed BEFORE UPDATE OF crawl_id ON crawl_pages
    FOR EACH ROW WHEN (NEW.crawl_id IS DISTINCT FROM OLD.crawl_id) EXECUTE FUNCTION waggle_crawl_pages_crawl_fixed();

CREATE FUNCTION waggle_crawls_delete_pages() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM crawl_pages p USING old_crawls o WHERE p.crawl_id = o.id;
    RETURN NULL;
END $$;

CREATE TRIGGER crawls_delete_pages AFTER DELETE ON crawls
    REFERENCING OLD TABLE AS old_crawls FOR EACH STATEMENT EXECUTE FUNCTION waggle_crawls_delete_pages();
