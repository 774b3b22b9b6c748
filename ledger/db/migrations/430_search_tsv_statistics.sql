-- Decision 431: the planner's statistics of archive_text.tsv keep 10 × 1,000 lexemes instead of
-- 10 × 100 (default_statistics_target). A word outside the kept list is estimated at 0.5 % of the
-- pages however common it is; at 1,000,000 bench pages `memoryview` (2.4 %) was one, so its
-- search took the GIN bitmap over 22,000 matches (340 ms) instead of a newest-first walk (60 ms).
-- ANALYZE of the column costs more (16 s at 1,000,000 pages, autovacuum's, in the background).
ALTER TABLE archive_text ALTER COLUMN tsv SET STATISTICS 1000;
