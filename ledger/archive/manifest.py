"""BrowserHive's ``.result.json`` manifest (``CaptureResultReport``, reference/contracts.md §B.3).

:func:`read_manifest` validates a decoded manifest with pydantic: unknown fields are ignored,
old status spellings (``httpError`` of v2.1, ``CAPTURE_STATUS_*`` of v3–v11) are read as the
v12 values, booleans are strict (``"yes"`` is not ``true``). A manifest that does not conform
raises :class:`ManifestInvalid` naming the failing path; callers log and skip it.

:func:`manifest_key` turns a reported ``manifestLocation`` into the key to read from the
configured bucket (reference/ledger.md §9.2): verbatim, never URL-decoded, never rebuilt.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, ValidationError, field_validator

from ledger.s3 import parse_location

Status = Literal["success", "failed", "timeout", "http_error"]

# Older spellings → v12 (v2.1 camelCase, v3–v11 protobuf JSON names).
_STATUS_ALIASES = {
    "httperror": "http_error",
    "http-error": "http_error",
    "capture_status_success": "success",
    "capture_status_failed": "failed",
    "capture_status_failure": "failed",
    "capture_status_timeout": "timeout",
    "capture_status_http_error": "http_error",
}


class ManifestInvalid(ValueError):
    """The manifest does not conform to ``CaptureResultReport``; ``str()`` names the path."""


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True, frozen=True)


class Artifacts(_Lenient):
    png: str | None = None
    webp: str | None = None
    html: str | None = None
    links: str | None = None
    mhtml: str | None = None
    wacz: str | None = None


MISSING_KEPT = 20  # missing-body / truncated URLs kept per archive (the capture's own cap)


class Completeness(_Lenient):
    """``completeness`` (contracts.md §B.3, §B.6) plus waggle's extension ``missingBodyUrls``
    (capped list) and ``missingBodyCount`` (docs/internals.md "Capture completeness"), absent
    from a real BrowserHive v12. ``complete`` as read is ANDed with the lists being empty, so a
    manifest that names a URL without a body is never taken as complete."""

    bodyless_urls: list[str] = Field(default_factory=list, alias="bodylessUrls")
    truncated_urls: list[str] = Field(default_factory=list, alias="truncatedUrls")
    missing_body_urls: list[str] | None = Field(None, alias="missingBodyUrls")
    missing_body_count: StrictInt | None = Field(None, alias="missingBodyCount", ge=0)
    complete: StrictBool

    @property
    def is_complete(self) -> bool:
        return (self.complete and not self.bodyless_urls and not self.truncated_urls
                and not self.missing_body_urls and not self.missing_body_count)

    def row(self) -> dict[str, Any]:
        """The archive row's completeness columns: ``wacz_complete``, ``missing_body_urls`` (≤
        :data:`MISSING_KEPT`), ``missing_body_count`` (never below the list's length),
        ``truncated_urls`` (≤ :data:`MISSING_KEPT`); NULL where the manifest said nothing."""
        urls = self.missing_body_urls
        count = self.missing_body_count
        if urls is not None or count is not None:
            count = max(count or 0, len(urls or []))
        return {"wacz_complete": self.is_complete,
                "missing_body_urls": None if urls is None else list(urls[:MISSING_KEPT]),
                "missing_body_count": count, "truncated_urls": list(self.truncated_urls[:MISSING_KEPT])}


NO_COMPLETENESS = {"wacz_complete": None, "missing_body_urls": None, "missing_body_count": None,
                   "truncated_urls": None}


class Incomplete(_Lenient):
    """``incomplete`` (docs/capture-server.md extension 14, absent from a real BrowserHive v12):
    the capture ended loading at the page-load deadline and holds what had loaded."""

    reason: str = Field(min_length=1, max_length=200)
    deadline_ms: StrictInt | None = Field(None, alias="deadlineMs", ge=0)
    pending_urls: list[str] = Field(default_factory=list, alias="pendingUrls")
    pending_count: StrictInt | None = Field(None, alias="pendingCount", ge=0)


class Signature(_Lenient):
    signed: StrictBool
    reason: str | None = None
    domain: str | None = None


class ErrorDetails(_Lenient):
    type: str | None = None
    message: str | None = None
    http_status_code: int | None = Field(None, alias="httpStatusCode")


class WaczStats(_Lenient):
    total_recorded: StrictInt = Field(0, alias="totalRecorded")
    total_blocked: StrictInt = Field(0, alias="totalBlocked")
    total_denied: StrictInt = Field(0, alias="totalDenied")
    total_skipped_content_type: StrictInt = Field(0, alias="totalSkippedContentType")
    total_skipped_url_policy: StrictInt = Field(0, alias="totalSkippedUrlPolicy")  # v12.2+, 0 before
    total_truncated_too_large: StrictInt = Field(0, alias="totalTruncatedTooLarge")
    total_truncated_task_cap: StrictInt = Field(0, alias="totalTruncatedTaskCap")
    total_failed: StrictInt = Field(0, alias="totalFailed")
    total_incomplete: StrictInt = Field(0, alias="totalIncomplete")
    total_body_bytes: StrictInt = Field(0, alias="totalBodyBytes")


class CaptureReport(_Lenient):
    """The fields of a manifest the ledger reads (others are ignored)."""

    task_id: str = Field(alias="taskId", min_length=1)
    correlation_id: str | None = Field(None, alias="correlationId")
    url: str = Field(min_length=1)
    labels: list[str] = Field(default_factory=list)
    status: Status
    timestamp: datetime  # RFC 3339 with offset: end of capture (BrowserHive's clock)
    capture_processing_time_ms: int = Field(alias="captureProcessingTimeMs")
    http_status_code: int | None = Field(None, alias="httpStatusCode")
    artifacts: Artifacts = Field(default_factory=Artifacts)
    wacz_stats: WaczStats | None = Field(None, alias="waczStats")
    completeness: Completeness | None = None
    incomplete: Incomplete | None = None
    signature: Signature | None = None
    error_details: ErrorDetails | None = Field(None, alias="errorDetails")

    @field_validator("status", mode="before")
    @classmethod
    def _old_spellings(cls, value: Any) -> Any:
        if isinstance(value, str):
            return _STATUS_ALIASES.get(value.strip().lower(), value.strip().lower())
        return value

    @field_validator("task_id")
    @classmethod
    def _uuid(cls, value: str) -> str:
        try:
            return str(uuid.UUID(value))
        except ValueError:
            raise ValueError("taskId must be a UUID") from None

    @field_validator("timestamp")
    @classmethod
    def _needs_offset(cls, value: datetime) -> datetime:
        if value.tzinfo is None:
            raise ValueError("timestamp must carry a time zone offset (RFC 3339)")
        return value

    def completeness_row(self) -> dict[str, Any]:
        """The archive row's completeness columns (all NULL when the manifest has none) and
        ``incomplete_reason`` (extension 14; it makes ``wacz_complete`` false)."""
        row = self.completeness.row() if self.completeness else dict(NO_COMPLETENESS)
        row["incomplete_reason"] = self.incomplete.reason if self.incomplete else None
        if self.incomplete:
            row["wacz_complete"] = False
        return row

    @property
    def has_archive(self) -> bool:
        """Only ``status == success`` with ``artifacts.wacz`` means an archive exists."""
        return self.status == "success" and bool(self.artifacts.wacz)


def read_manifest(data: Any) -> CaptureReport:
    """Validate a decoded ``.result.json``; raises :class:`ManifestInvalid` (path + reason)."""
    if not isinstance(data, dict):
        raise ManifestInvalid(f"CaptureResultReport: must be an object, got {type(data).__name__}")
    try:
        return CaptureReport.model_validate(data)
    except ValidationError as exc:
        parts = []
        for err in exc.errors():
            path = "/".join(str(p) for p in err["loc"]) or "(root)"
            parts.append(f"{path}: {err['msg']}")
        raise ManifestInvalid("CaptureResultReport: " + "; ".join(parts)) from None


def manifest_key(location: str | None, error: str | None, bucket: str) -> tuple[str | None, str | None]:
    """``(key, None)`` to read, or ``(None, reason)`` (reference/ledger.md §9.2).

    ``error`` (the report's ``manifestError``) wins; a location that is not ``s3://`` or names
    another bucket than the configured ``bucket`` yields a reason, never an exception.
    """
    if error:
        return None, error
    if not location:
        return None, "no manifest location was reported"
    try:
        loc_bucket, key = parse_location(location)
    except ValueError:
        return None, f"not an s3:// location the ledger can read: {location}"
    if loc_bucket != bucket:
        return None, f"written to bucket {loc_bucket}, but the ledger reads {bucket}: {location}"
    return key, None
