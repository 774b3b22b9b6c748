"""Issue 27 item 2 through the whole local stack: a crawl workflow's schedule is a schedule of the
local Windmill runner; when it fires (the runner's test hook advances its clock to the fire
time instead of waiting) its job runs f/waggle/run_workflow with the flow's token, the ledger
starts the workflow's crawl of a real site; a fire while that crawl still runs is skipped with
its reason; deleting the workflow removes the schedule and keeps the crawl."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta

import httpx
import pytest

from devstack.layout import WORKSPACE
from tests.fixtures.logged_site import LoggedSite

pytestmark = pytest.mark.e2e


def _until(what: str, probe, timeout_s: float = 120.0, every_s: float = 0.2):
    deadline = time.monotonic() + timeout_s
    while not (got := probe()):
        assert time.monotonic() < deadline, f"no {what} within {timeout_s} s"
        time.sleep(every_s)
    return got


def test_a_schedule_fires_runs_the_workflow_and_skips_while_it_runs(local_stack):
    site = LoggedSite()
    token = json.loads((local_stack.state_dir / "secrets.json").read_text())["windmill_token"]
    windmill = httpx.Client(base_url=f"{local_stack.info['services']['windmill']}/api/w/{WORKSPACE}", timeout=30,
                            headers={"Authorization": f"Bearer {token}"})
    api = httpx.Client(base_url=local_stack.api_url, timeout=30,
                       headers={"Authorization": f"Bearer {local_stack.token()}"})

    def job_result(job_id: str) -> dict:
        got = _until(f"end of job {job_id}", lambda: (r := windmill.get(
            f"/jobs_u/completed/get_result_maybe/{job_id}").json())["completed"] and r)
        assert got["success"], got
        return got["result"]

    def fire(path: str) -> str:
        """Advance the runner's clock to the schedule's next fire time; the one job it started."""
        due = datetime.fromisoformat(windmill.get(f"/schedules/get/{path}").json()["next_at"])
        assert windmill.post("/schedules_local/tick", json={"now": (due - timedelta(seconds=1)).isoformat()}
                             ).json() == []  # a second early: nothing
        fired = windmill.post("/schedules_local/tick", json={"now": due.isoformat()}).json()
        assert [f["path"] for f in fired] == [path], fired
        return fired[0]["jobId"]

    try:
        r = api.post("/api/workflows", json={
            # once a year: the runner's real clock never fires it during the test, only the hook does
            "name": "site on new year's morning", "notes": "local stack test",
            # two pages of one host 6 s apart: the crawl is still running when the schedule fires again
            "options": {"seeds": [f"{site.url}/", f"{site.url}/a"], "maxDepth": 0, "scripts": [],
                        "perHostDelayMs": 6000},
            "schedule": {"cron": "0 4 1 1 *", "timeZone": "Europe/Paris"}})
        assert r.status_code == 201, r.text
        wid, path = r.json()["workflowId"], r.json()["schedule"]["windmillSchedule"]
        kept = windmill.get(f"/schedules/get/{path}").json()
        assert (kept["schedule"], kept["timezone"], kept["script_path"]) == (
            "0 0 4 1 1 *", "Europe/Paris", "f/waggle/run_workflow")

        due = datetime.fromisoformat(kept["next_at"])
        assert (due.month, due.day, due.hour, due.utcoffset()) == (1, 1, 4, timedelta(hours=1))
        first = job_result(fire(path))
        assert first["outcome"] == "started", first
        crawl_id = first["crawlId"]
        assert api.get(f"/api/crawls/{crawl_id}").json()["state"] == "running"
        second = job_result(fire(path))
        assert second["outcome"] == "skipped" and crawl_id in second["reason"], second

        crawl = _until("end of the crawl", lambda: (c := api.get(f"/api/crawls/{crawl_id}").json())["state"]
                       != "running" and c)
        assert (crawl["state"], crawl["pagesCaptured"], crawl["workflowId"]) == ("succeeded", 2, wid)
        runs = api.get(f"/api/workflows/{wid}/history").json()["runs"]
        assert [(x["outcome"], x["trigger"], x["requestedBy"]) for x in runs] == [
            ("skipped", "schedule", "waggle-flow"), ("started", "schedule", "waggle-flow")]
        assert runs[1]["crawl"]["crawlId"] == crawl_id

        deleted = api.delete(f"/api/workflows/{wid}").json()
        assert deleted == {"deleted": wid, "crawlsKept": 1}
        assert windmill.get(f"/schedules/exists/{path}").json() is False
        assert api.get(f"/api/crawls/{crawl_id}").json()["state"] == "succeeded"
    finally:
        api.close()
        windmill.close()
        site.stop()
