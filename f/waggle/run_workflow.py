# /// script
# requires-python = ">=3.11"
# dependencies = ["httpx==0.28.1"]
# ///
"""run_workflow: what a crawl workflow's Windmill schedule runs (issue 27, decision 201).

``POST {waggle_url}/api/workflows/{workflow_id}/run`` with ``{"trigger": "schedule"}``. 202 →
``{outcome: "started", crawlId}``; 409 (one of the workflow's crawls still runs: the ledger
skips this run and records why) → a green ``{outcome: "skipped", reason}``; anything else
raises, so the schedule's job fails with the ledger's reason. It does not wait for the crawl:
the ledger, not this job, keeps two runs of one workflow apart.
"""

from __future__ import annotations

import json

import httpx


class RunError(RuntimeError):
    """The ledger did not start the workflow's crawl (and did not skip it either)."""


def run(waggle_url: str, token: str, workflow_id: str, *, client: httpx.Client | None = None,
        log=print) -> dict:
    """Ask the ledger to run the workflow once; returns ``{outcome, crawlId | reason}``."""
    http = client or httpx.Client(timeout=30.0)
    url = f"{waggle_url.rstrip('/')}/api/workflows/{workflow_id}/run"
    try:
        resp = http.post(url, content=json.dumps({"trigger": "schedule"}).encode(),
                         headers={"authorization": f"Bearer {token}", "content-type": "application/json"})
    finally:
        if client is None:
            http.close()
    try:
        body = resp.json()
    except ValueError:
        body = {}
    if resp.status_code == 202:
        log(f"workflow {workflow_id}: crawl {body.get('crawlId')} started")
        return {"outcome": "started", "crawlId": body.get("crawlId")}
    if resp.status_code == 409:
        log(f"workflow {workflow_id}: skipped: {body.get('error')}")
        return {"outcome": "skipped", "reason": body.get("error")}
    hint = " (no such workflow, or the token's subject may not run it)" if resp.status_code == 404 else ""
    raise RunError(f"POST {url} → {resp.status_code} {resp.text[:300]}{hint}")


def main(waggle_url: str, token: str, workflow_id: str):
    return run(waggle_url, token, workflow_id)
