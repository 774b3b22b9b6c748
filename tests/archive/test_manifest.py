"""Manifest validation (contracts.md §B.3) and manifest keys (ledger.md §9.2), no I/O."""

from __future__ import annotations

import pytest

from ledger.archive.manifest import ManifestInvalid, manifest_key, read_manifest
from tests.archive.helpers import manifest


def test_v12_manifest_is_read() -> None:
    m = read_manifest(manifest("0b7d3a52-3b43-4c61-9a43-9f4b5a1c2d3e", wacz_key="k.wacz"))
    assert m.status == "success" and m.task_id == "0b7d3a52-3b43-4c61-9a43-9f4b5a1c2d3e"
    assert m.artifacts.wacz == "s3://browserhive/k.wacz" and m.completeness.complete is True
    assert m.labels == ["smoke"] and m.has_archive
    assert m.timestamp.isoformat() == "2026-09-24T00:00:04.210000+00:00"


@pytest.mark.parametrize("spelling,expected", [
    ("CAPTURE_STATUS_SUCCESS", "success"), ("httpError", "http_error"), ("CAPTURE_STATUS_TIMEOUT", "timeout"),
    ("HTTP_ERROR", "http_error"),
])
def test_old_status_spellings_are_tolerated(spelling: str, expected: str) -> None:
    assert read_manifest(manifest(status="success") | {"status": spelling}).status == expected


@pytest.mark.parametrize("change,path", [
    ({"status": "exploded"}, "status"),
    ({"completeness": {"complete": "yes"}}, "completeness/complete"),
    ({"taskId": None}, "taskId"),
    ({"taskId": "not-a-uuid"}, "taskId"),
    ({"timestamp": "2026-09-24T00:00:04"}, "timestamp"),
    ({"captureProcessingTimeMs": None}, "captureProcessingTimeMs"),
])
def test_non_conforming_manifest_names_the_path(change: dict, path: str) -> None:
    with pytest.raises(ManifestInvalid) as info:
        read_manifest(manifest() | change)
    assert path in str(info.value) and str(info.value).startswith("CaptureResultReport:")


def test_missing_required_field_and_non_object() -> None:
    data = manifest()
    del data["url"]
    with pytest.raises(ManifestInvalid, match="url"):
        read_manifest(data)
    with pytest.raises(ManifestInvalid, match="must be an object"):
        read_manifest(["not", "a", "manifest"])


def test_unknown_fields_are_ignored_and_old_wacz_stats_get_defaults() -> None:
    m = read_manifest(manifest(settle={"strategy": "fully-loaded"}, futureField=[1, 2],
                               waczStats={"totalRecorded": 3, "totalBlocked": 0, "totalDenied": 0,
                                          "totalSkippedContentType": 0, "totalTruncatedTooLarge": 0,
                                          "totalTruncatedTaskCap": 0, "totalFailed": 0, "totalIncomplete": 0,
                                          "totalBodyBytes": 10}))
    assert m.wacz_stats.total_skipped_url_policy == 0 and m.wacz_stats.total_recorded == 3


def test_manifest_without_wacz_or_failed_has_no_archive() -> None:
    no_wacz = manifest() | {"artifacts": {"png": "s3://browserhive/x.png"}}
    assert not read_manifest(no_wacz).has_archive
    for status in ("failed", "timeout", "http_error"):
        failed = manifest(status=status) | {"artifacts": {"wacz": "s3://browserhive/x.wacz"}}
        assert not read_manifest(failed).has_archive


def test_manifest_key_is_verbatim_and_bucket_checked() -> None:
    loc = "s3://browserhive/elsewhere/x y+z %41 ü.result.json"
    assert manifest_key(loc, None, "browserhive") == ("elsewhere/x y+z %41 ü.result.json", None)
    assert manifest_key(None, "sink refused: 500", "browserhive") == (None, "sink refused: 500")
    key, reason = manifest_key("s3://other/x.result.json", None, "browserhive")
    assert key is None and "other" in reason and "browserhive" in reason
    key, reason = manifest_key("file:///etc/passwd", None, "browserhive")
    assert key is None and "file:///etc/passwd" in reason
