-- Issue 24 item 8, helper "wishes": how long a page's capture waited behind the previous page of
-- its host (a held capture: startAfterMs / holdAfter, the capture answer's turnWaitMs), in ms.
-- The page's capture duration (GET /api/crawls/:id/pages captureMs) is finished_at − submitted_at
-- minus this wait; NULL (every page before this column, a real BrowserHive v12) = no wait known.
ALTER TABLE crawl_pages ADD COLUMN wait_ms integer;
