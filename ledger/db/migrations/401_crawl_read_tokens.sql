-- Decision 405 (helper "polish"): capture servers read three ledger routes for a crawl (the digest
-- lookup of extension revisit, the previous capture of extension conditional, the host's
-- politeness of extension holdAdmission) and were given the flow's own token for it. They now
-- get a read token of one crawl: only its SHA-256 is kept, with the crawl and an expiry.
CREATE TABLE crawl_read_tokens (
    token_hash  bytea PRIMARY KEY,
    crawl_id    uuid NOT NULL REFERENCES crawls (id) ON DELETE CASCADE,
    issued_to   text NOT NULL,
    expires_at  timestamptz NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX crawl_read_tokens_expires_at_idx ON crawl_read_tokens (expires_at);
