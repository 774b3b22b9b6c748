-- Level report v2 (issue 14): admission after the answer. The flow relays what the capture
-- answer said about its manifest (manifest_summary {status, wacz?}); admission reads the
-- manifest later and admits it only when it agrees. A refusal is kept (verify_error) so the
-- reconciler does not try the same manifest again. Existing rows: both NULL (old shape).
ALTER TABLE capture_submissions ADD COLUMN manifest_summary jsonb
    CHECK (manifest_summary IS NULL OR jsonb_typeof(manifest_summary) = 'object');
ALTER TABLE capture_submissions ADD COLUMN verify_error text;
