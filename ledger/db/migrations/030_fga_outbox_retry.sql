-- Outbox back-off (issue 3): a row that OpenFGA refused is retried no earlier than
-- next_attempt_at (exponential back-off with jitter, set by the worker). NULL = due now.
ALTER TABLE fga_outbox ADD COLUMN next_attempt_at timestamptz;
CREATE INDEX fga_outbox_due_idx ON fga_outbox (next_attempt_at, id) WHERE processed_at IS NULL;
