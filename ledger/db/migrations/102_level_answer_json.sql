-- Issue 14: the stored answer of a level report (returned as is to an identical re-send) is
-- kept as json text instead of jsonb. Nothing queries inside it, and a 90,000-page answer
-- (7 MB) cost the report 0.1–0.2 s of server CPU to convert to jsonb (json: only validated).
-- Existing answers are converted (same JSON value; key order as jsonb kept it).
ALTER TABLE crawl_level_reports DROP CONSTRAINT crawl_level_reports_answer_check;
ALTER TABLE crawl_level_reports ALTER COLUMN answer TYPE json USING answer::json;
ALTER TABLE crawl_level_reports ADD CONSTRAINT crawl_level_reports_answer_check CHECK (json_typeof(answer) = 'object');
