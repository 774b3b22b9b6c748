-- Issue 27 item 2, polish round (helper "polish", docs/decisions/351): who was granted what on a
-- workflow. The OpenFGA tuples (workflow:<id> editor|runner|viewer user:<subject>) are written
-- through fga_outbox in the same transaction as these rows; the rows are what the grants routes
-- list and what a workflow's deletion removes from OpenFGA. One role per user per workflow.
CREATE TABLE workflow_grants (
    workflow_id uuid NOT NULL REFERENCES workflows (id) ON DELETE CASCADE,
    subject text NOT NULL CHECK (length(subject) BETWEEN 1 AND 200),
    role text NOT NULL CHECK (role IN ('editor', 'runner', 'viewer')),
    granted_by text NOT NULL,
    granted_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workflow_id, subject)
);

-- The creator's editor tuple was written at creation (ledger.crawl.workflows.tuples): list it too.
INSERT INTO workflow_grants (workflow_id, subject, role, granted_by, granted_at)
SELECT id, created_by, 'editor', created_by, created_at FROM workflows
ON CONFLICT DO NOTHING;
