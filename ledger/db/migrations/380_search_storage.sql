-- Issue 26 at 1,000,000 pages (helper "search", docs/decisions/381-search-index-storage-and-cost.md).
-- The tsvector stays in the row, uncompressed, and the body goes out of line: every `@@` a
-- newest-first walk tests, every phrase recheck and every ts_rank_cd reads tsv, while body is
-- read only for the ten snippets of a page. With the defaults (both EXTENDED, the 2 KB target)
-- a page of ~1,700 chars had its tsv compressed *and* moved to TOAST: each row tested cost a
-- TOAST index probe and a pglz decompression, and each row written a compression and a TOAST
-- insert. Applies to rows written from now on (older rows are read as they are).
-- * tsv, title, url MAIN: compressed or moved out only when the row cannot fit otherwise;
-- * body EXTERNAL: out of line, not compressed (pglz on it cost more CPU than the disk it saved);
-- * toast_tuple_target 3000: a row over 2 KB has its body moved out and then fits (≈ 3 rows a
--   page with their tsv in line); at the default 2 KB target the toaster then also tried to
--   compress tsv (pglz, which fails on most tsvectors: CPU for nothing), and above ~8 KB it still
--   compresses or moves a very large tsv out.
ALTER TABLE archive_text
    ALTER COLUMN tsv SET STORAGE MAIN,
    ALTER COLUMN title SET STORAGE MAIN,
    ALTER COLUMN url SET STORAGE MAIN,
    ALTER COLUMN body SET STORAGE EXTERNAL;
ALTER TABLE archive_text SET (toast_tuple_target = 3000);

-- No query walks captured_at alone: every candidate branch is scoped by organization (or by the
-- shared archives' ids), and a from/to filter is a range of (org_id, captured_at DESC). One
-- b-tree less to maintain per page indexed.
DROP INDEX IF EXISTS archive_text_captured_idx;

-- GIN pending list of 16 MB (default 4 MB): the indexer's cleanup merges 4× more pages per pass
-- (with its work_mem raised, ledger.search.indexer), so each lexeme's posting list is updated
-- once per ~5,000 pages instead of ~1,300. A query scans the pending list: ≤ 16 MB while a bulk
-- index runs, nothing once autovacuum or the next cleanup merged it.
ALTER INDEX archive_text_tsv_idx SET (gin_pending_list_limit = 16384);
