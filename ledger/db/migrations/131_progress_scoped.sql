-- Issue 14, fifth round (docs/internals.md "Scope verdicts from progress"): when a progress
-- event's links land, the ledger keeps what its scope said of them, so the level report does not
-- scope those links again: the accepted URLs in order (url, dedup key, origin) with their URL
-- trap verdicts, and the drop counts by reason (ledger.crawl.report_early.Scoped, orjson bytes).
-- NULL: nothing landed, or landed by a ledger before this migration (the report then scopes the
-- links itself, as before). Stored uncompressed (EXTERNAL): written once and read once per page,
-- compression would only cost CPU on both sides. Nullable, no default: existing rows untouched.
ALTER TABLE crawl_progress ADD COLUMN links_scoped bytea;
ALTER TABLE crawl_progress ALTER COLUMN links_scoped SET STORAGE EXTERNAL;
