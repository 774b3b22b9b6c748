"""run_workflow, what a crawl workflow's Windmill schedule runs (decision 201), against a fake
ledger on 127.0.0.1: 202 started, 409 a green skip with the ledger's reason, anything else fails
the job naming the status and body."""

from __future__ import annotations

import json

import pytest

from f.waggle.run_workflow import RunError, run
from tests.flow.fakes import HttpFake


@pytest.mark.parametrize("answer, expected", [
    ((202, {}, {"crawlId": "c1", "workflowId": "w1"}), {"outcome": "started", "crawlId": "c1"}),
    ((409, {}, {"error": "skipped: crawl c0 of this workflow is still running", "runningCrawl": "c0"}),
     {"outcome": "skipped", "reason": "skipped: crawl c0 of this workflow is still running"}),
])
def test_started_or_skipped(answer, expected):
    fake = HttpFake(lambda req: answer)
    try:
        assert run(fake.url + "/", "tok", "w1", log=lambda _m: None) == expected
        (req,) = fake.requests
        assert (req.method, req.path) == ("POST", "/api/workflows/w1/run")
        assert req.headers["authorization"] == "Bearer tok" and json.loads(req.body) == {"trigger": "schedule"}
    finally:
        fake.close()


@pytest.mark.parametrize("answer, needle", [
    ((404, {}, {"error": "not found"}), "may not run it"),
    ((400, {}, {"error": "no enabled capture targets for this organization"}), "no enabled capture targets"),
    ((500, {}, "boom"), "500 boom"),
])
def test_anything_else_fails_the_job_with_the_reason(answer, needle):
    fake = HttpFake(lambda req: answer)
    try:
        with pytest.raises(RunError, match=needle):
            run(fake.url, "tok", "w1", log=lambda _m: None)
    finally:
        fake.close()
