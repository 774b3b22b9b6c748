"""Test data for the archive tests: manifests and S3 uploads."""

from __future__ import annotations

import json
import uuid
from typing import Any


def manifest(task_id: str | None = None, *, status: str = "success", bucket: str = "browserhive",
             wacz_key: str | None = None, url: str = "https://example.org/", complete: bool | None = True,
             timestamp: str = "2026-09-24T00:00:04.210Z", **extra: Any) -> dict:
    """A v12 ``CaptureResultReport`` as BrowserHive writes it."""
    task_id = task_id or str(uuid.uuid4())
    m: dict[str, Any] = {
        "taskId": task_id, "correlationId": "crawl-1", "url": url, "labels": ["smoke"], "status": status,
        "timestamp": timestamp, "captureProcessingTimeMs": 1234, "artifacts": {},
    }
    if status == "success":
        m["httpStatusCode"] = 200
        m["artifacts"] = {"wacz": f"s3://{bucket}/{wacz_key or task_id + '_crawl-1_smoke.wacz'}"}
        if complete is not None:
            m["completeness"] = {"bodylessUrls": [], "truncatedUrls": [], "complete": complete}
    else:
        m["errorDetails"] = {"type": "timeout" if status == "timeout" else "http", "message": "boom"}
    m.update(extra)
    return m


def put_json(s3_server, key: str, data: Any) -> None:
    s3_server.client().put_object(Bucket=s3_server.bucket, Key=key, Body=json.dumps(data).encode(),
                                  ContentType="application/json")
