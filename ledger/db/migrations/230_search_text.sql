-- Issue 26 (helper "search"): full-text search of what was archived, in the ledger's database
-- (docs/decisions/162-search-postgres-fts.md). One row per indexed archive: the page's text as
-- extracted from its WARC at index time (ledger.search), and a weighted tsvector built with the
-- page language's text-search configuration (title A, headings B, body C; 'simple' when the
-- language has no configuration or is unknown). archives.indexed_at (already in 001) marks an
-- archive as done, with or without text (problem says why there is none).
-- No owner column here either: who may see a hit is asked of OpenFGA per candidate.
CREATE TABLE archive_text (
    archive_id  uuid PRIMARY KEY REFERENCES archives (id) ON DELETE CASCADE,
    crawl_id    uuid,                    -- the crawl that captured it (archives.correlation_id), NULL if none
    host        text NOT NULL,           -- lower-case host of the page URL (filter)
    url         text NOT NULL,
    captured_at timestamptz NOT NULL,
    title       text NOT NULL DEFAULT '',
    lang        text,                    -- ISO 639 code from <html lang> or detected; NULL unknown
    config      regconfig NOT NULL,      -- the text-search configuration tsv was built with
    body        text NOT NULL DEFAULT '',-- visible text (≤ 200,000 chars): ts_headline's input
    problem     text,                    -- why the archive has no text (NULL: it has)
    tsv         tsvector NOT NULL,
    indexed_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX archive_text_tsv_idx ON archive_text USING gin (tsv);
CREATE INDEX archive_text_crawl_idx ON archive_text (crawl_id);
CREATE INDEX archive_text_host_idx ON archive_text (host);
CREATE INDEX archive_text_captured_idx ON archive_text (captured_at);

-- The configurations some row was built with: a query is parsed once per configuration in
-- use (a row matches only a query parsed with its own configuration's stemmer).
CREATE TABLE search_configs (
    config regconfig PRIMARY KEY
);
