-- Issue 13 item 2: the dedup key (crawl_pages.url_key) is now normalized per RFC 3986 §6.2.2
-- after WHATWG serialization: %XX of an unreserved character (ALPHA / DIGIT / - . _ ~) decoded,
-- every other %XX upper-cased, a stray '%' written %25 (ledger.crawl.urls.normalize_percent).
-- Stored keys are recomputed so a crawl running across the upgrade still matches its reported
-- pages to their rows (the level report looks rows up by the hash of the new key) and does not
-- capture a page again under a second spelling. url_hash is generated from url_key, so it
-- follows. Where two rows of one crawl now share a key (the page was stored twice under two
-- spellings), the oldest row takes the key and the others keep theirs (nothing is deleted).

CREATE FUNCTION waggle_url_key_060(key text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT AS $$
DECLARE
    head text := substring(key from '^[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*');
    rest text;
    out text := '';
    i int := 1;
    n int;
    hex text;
    code int;
BEGIN
    IF head IS NULL OR position('%' in key) = 0 THEN
        RETURN key;
    END IF;
    rest := substr(key, length(head) + 1);
    n := length(rest);
    WHILE i <= n LOOP
        IF substr(rest, i, 1) <> '%' THEN
            out := out || substr(rest, i, 1);
            i := i + 1;
        ELSIF substr(rest, i + 1, 2) ~ '^[0-9A-Fa-f]{2}$' THEN
            hex := upper(substr(rest, i + 1, 2));
            code := ('x' || lpad(hex, 8, '0'))::bit(32)::int;
            IF (code BETWEEN 48 AND 57) OR (code BETWEEN 65 AND 90) OR (code BETWEEN 97 AND 122)
               OR code IN (45, 46, 95, 126) THEN
                out := out || chr(code);
            ELSE
                out := out || '%' || hex;
            END IF;
            i := i + 3;
        ELSE
            out := out || '%25';
            i := i + 1;
        END IF;
    END LOOP;
    RETURN head || out;
END
$$;

WITH changed AS (
    SELECT id, crawl_id, waggle_url_key_060(url_key) AS new_key,
           row_number() OVER (PARTITION BY crawl_id, waggle_url_key_060(url_key) ORDER BY id) AS rn
    FROM crawl_pages
    WHERE position('%' in url_key) > 0
)
UPDATE crawl_pages p SET url_key = c.new_key
FROM changed c
WHERE p.id = c.id AND c.rn = 1 AND c.new_key <> p.url_key
  AND NOT EXISTS (SELECT 1 FROM crawl_pages q
                  WHERE q.crawl_id = c.crawl_id AND q.url_hash = waggle_sha256(c.new_key));
