-- Round 21, helper "deadline": why a capture is incomplete as the capture server said it, beyond
-- missing bodies. 'page-load-deadline' = the page's load event did not come within the page-load
-- budget and the server captured what had loaded (docs/capture-server.md extension 14, manifest
-- member `incomplete`; the URLs still pending are in missing_body_urls). NULL = the manifest said
-- nothing (a page that loaded, or a real BrowserHive v12). Such an archive has wacz_complete = false.
ALTER TABLE archives ADD COLUMN incomplete_reason text;
