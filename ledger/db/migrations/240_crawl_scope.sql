-- Issue 29 item 1 (helper "scope", docs/decisions/171): a crawl's scope type (page, prefix,
-- host, domain, origin; the old names same-origin / same-host stay valid for rows written
-- before), its include / exclude patterns (RE2, over the normalized URL; checked at submission)
-- and extra hops. A page's hops = how far out of scope it is (0: in scope).
ALTER TABLE crawls DROP CONSTRAINT IF EXISTS crawls_scope_check;
ALTER TABLE crawls ADD CONSTRAINT crawls_scope_check
    CHECK (scope IN ('page', 'prefix', 'host', 'domain', 'origin', 'same-origin', 'same-host'));
ALTER TABLE crawls ADD COLUMN scope_include text[] NOT NULL DEFAULT '{}';
ALTER TABLE crawls ADD COLUMN scope_exclude text[] NOT NULL DEFAULT '{}';
ALTER TABLE crawls ADD COLUMN extra_hops integer NOT NULL DEFAULT 0 CHECK (extra_hops BETWEEN 0 AND 10);
ALTER TABLE crawl_pages ADD COLUMN hops smallint NOT NULL DEFAULT 0 CHECK (hops >= 0);
