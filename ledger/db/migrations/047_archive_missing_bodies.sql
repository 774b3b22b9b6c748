-- Why an archive is incomplete (issue 17 item 3), as its manifest said at admission:
-- missing_body_urls = URLs the page requested that got no response body into the archive
-- (at most 20, the capture's own cap), missing_body_count = how many there were in all,
-- truncated_urls = bodies a size cap dropped. NULL = the manifest did not say (a real
-- BrowserHive v12, or an archive admitted before this migration); existing rows keep NULL.
ALTER TABLE archives
    ADD COLUMN missing_body_urls  text[],
    ADD COLUMN missing_body_count integer CHECK (missing_body_count >= 0),
    ADD COLUMN truncated_urls     text[];
