-- Issue 27 item 2 (helper "workflows", docs/decisions/201): saved crawl workflows.
-- * options: the POST /api/crawls body as the route validated it (ledger.api.crawls.CrawlRequest,
--   JSON of the fields the caller set; defaults apply at run time), re-validated on every run, so options added to that model are
--   carried without a column each;
-- * schedule: a 5-field cron expression and an IANA time zone, both or neither; executed by a
--   Windmill schedule (path in windmill_schedule) that runs f/waggle/run_workflow;
-- * who may view, run, edit: OpenFGA type workflow (no owner column here; org_id says which
--   organization's crawls a run starts and which saved targets fromTargets reads).
CREATE TABLE workflows (
    id uuid PRIMARY KEY,
    org_id text NOT NULL,
    name text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    notes text NOT NULL DEFAULT '',
    options jsonb NOT NULL,
    schedule_cron text,
    schedule_tz text,
    windmill_schedule text,
    created_by text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT workflows_schedule_pair CHECK ((schedule_cron IS NULL) = (schedule_tz IS NULL)),
    CONSTRAINT workflows_org_name UNIQUE (org_id, name)
);

-- A crawl a workflow started. Deleting the workflow keeps the crawl (and its archives): the link
-- becomes NULL. "What changed" reads a workflow's last two crawls through this index.
ALTER TABLE crawls ADD COLUMN workflow_id uuid REFERENCES workflows (id) ON DELETE SET NULL;
CREATE INDEX crawls_workflow_started ON crawls (workflow_id, started_at DESC) WHERE workflow_id IS NOT NULL;

-- Every run asked of a workflow: started (crawl_id set), skipped (one of its crawls still ran:
-- never two at once) or refused (the crawl could not start: reason says why).
CREATE TABLE workflow_runs (
    id bigserial PRIMARY KEY,
    workflow_id uuid NOT NULL REFERENCES workflows (id) ON DELETE CASCADE,
    at timestamptz NOT NULL DEFAULT now(),
    trigger text NOT NULL CHECK (trigger IN ('manual', 'schedule')),
    requested_by text NOT NULL,
    outcome text NOT NULL CHECK (outcome IN ('started', 'skipped', 'refused')),
    crawl_id uuid REFERENCES crawls (id) ON DELETE SET NULL,
    reason text,
    CONSTRAINT workflow_runs_crawl_of_a_start CHECK (outcome = 'started' OR crawl_id IS NULL)
);
CREATE INDEX workflow_runs_by_workflow ON workflow_runs (workflow_id, at DESC);
