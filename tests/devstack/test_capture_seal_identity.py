"""The seal answer names the capture (docs/capture-server.md, extension "robots"; issue 24 item
5): ``taskId`` and the ``manifestLocation`` its manifest will be written to arrive while the
capture still packages or uploads its WACZ, so a client that goes away then (a failed crawl's
cancelled job) has already told the ledger where the archive will land. Real server, real
Chromium, the S3 stand-in; the fault knobs ``slow_package_ms`` / ``slow_upload_ms`` hold the
capture after its seal."""

from __future__ import annotations

import json
import threading
import time
import uuid

import httpx
import pytest

from tests.devstack.helpers import ONLY_WACZ, faults, s3_get

HOLD_MS = 3000


@pytest.mark.parametrize("knob", ["slow_package_ms", "slow_upload_ms"])
def test_seal_answer_names_the_task_and_its_manifest_before_the_answer(capture_server, test_site, s3_server, knob):
    key = f"id-{uuid.uuid4().hex[:12]}"
    out: dict = {}

    def post() -> None:
        r = httpx.post(f"{capture_server}/captures", json={"url": test_site.url("/page"), "captureFormats": ONLY_WACZ},
                       headers={"Waggle-Capture-Key": key}, timeout=150)
        out["answer"], out["answered"] = r, time.monotonic()

    with faults(capture_server, **{knob: HOLD_MS}):
        thread = threading.Thread(target=post, daemon=True)
        thread.start()
        seal = httpx.get(f"{capture_server}/captures/seal", params={"key": key, "timeoutMs": 60_000}, timeout=90)
        sealed_at = time.monotonic()
        body = seal.json()
        # the manifest is not written yet when the seal answers: the capture is held after its seal
        assert body["sealed"] is True and isinstance(body["taskId"], str)
        location = body["manifestLocation"]
        assert location.startswith(f"s3://{s3_server.bucket}/{body['taskId']}_") and location.endswith(".result.json")
        early = "answer" in out
        with pytest.raises(Exception):  # held after its seal: the manifest is not written yet
            s3_get(s3_server, location)
        thread.join(120)
    assert not early, (out["answered"] - sealed_at)
    answer = out["answer"].json()
    assert out["answered"] - sealed_at >= HOLD_MS / 1000 * 0.9  # the seal came well before the answer
    assert answer["taskId"] == body["taskId"] and answer["manifest"]["location"] == location
    written = json.loads(s3_get(s3_server, location))
    assert written["taskId"] == body["taskId"] and written["status"] == "success"
