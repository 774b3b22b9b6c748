"""Settings of one capture server process (flags of ``waggle capture serve`` / ``python -m waggle_capture``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone

from waggle_capture.browser import CHROMIUM
from waggle_capture.signing import SignerSettings
from ledger.useragent import suffix as waggle_suffix

# version: the BrowserHive contract implemented (clients compare it); revision: which implementation
BUILD = {"version": "12.0.1", "revision": "waggle-capture",
         "buildTime": datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")}
SOFTWARE = f"browserhive/{BUILD['version']} (waggle capture server)"  # WARC warcinfo, WACZ datapackage
ERROR_TYPES = ("http", "timeout", "connection", "internal", "artifact_sink", "policy", "signing")


@dataclass
class Faults:
    """Fault knobs for tests, all off by default (contracts.md §D.3.7).

    ``slow_ms``: extra wait inside every capture (holds the busy lock); ``error_type``: every
    capture ends with this ``errorDetails.type`` without loading (``http`` → ``http_error`` 503);
    ``manifest_fail``: the manifest write fails (``manifest.error``); ``refuse_500``: ``POST
    /captures`` answers 500 ``InternalFailure``; ``crash_during_upload``: the process exits
    (status 137) after the first artifact upload, before the manifest (case C10);
    ``crash_browser``: the browser is killed when the next capture starts (it must relaunch);
    ``task_total_ms``: overrides the whole-task budget (deadline tests); ``max_rss_mb``: overrides
    the browser's RSS bound and ``recycle_every`` the capture count between relaunches (recycling
    tests). 0 = the server setting. ``slow_package_ms`` / ``slow_upload_ms``: extra wait after the
    page's network sealed, before packaging the WACZ / after its upload, before the manifest (a
    crawl failed while a capture packages or uploads, issue 24 item 5).
    """

    slow_ms: int = 0
    error_type: str | None = None
    manifest_fail: bool = False
    refuse_500: bool = False
    crash_during_upload: bool = False
    crash_browser: bool = False
    task_total_ms: int = 0
    max_rss_mb: float = 0.0
    recycle_every: int = 0
    slow_package_ms: int = 0
    slow_upload_ms: int = 0

    def update(self, values: dict) -> None:
        """Set knobs from a JSON object; raises ValueError for unknown names or bad values."""
        for k, v in values.items():
            if k not in self.__dataclass_fields__:
                raise ValueError(f"unknown fault knob {k!r}")
            if k == "error_type" and v is not None and v not in ERROR_TYPES:
                raise ValueError(f"error_type must be one of {ERROR_TYPES}")
            setattr(self, k, v)


@dataclass
class ServerSettings:
    """Limits in bytes, times in ms."""

    allow_private: bool = False
    s3_endpoint: str | None = None
    s3_bucket: str = "browserhive"
    s3_access_key: str = "browserhive"
    s3_secret_key: str = "browserhive"
    s3_region: str = "us-east-1"
    s3_key_prefix: str = ""
    chromium: str = CHROMIUM
    max_response_bytes: int = 20 * 1024 * 1024
    max_task_bytes: int = 200 * 1024 * 1024
    max_pending_requests: int = 5000
    task_total_ms: int = 130_000
    page_load_ms: int = 30_000
    operation_ms: int = 10_000
    behaviors_ms: int = 30_000
    manifest_ms: int = 10_000
    settle: dict = field(default_factory=lambda: {"minMs": 1000, "maxMs": 3000, "quietMs": 1000, "networkConcurrency": 0})
    viewport: dict = field(default_factory=lambda: {"width": 1280, "height": 800})
    device_pixel_ratios: list[int] = field(default_factory=lambda: [1])
    recycle_every: int = 100
    max_rss_mb: float = 1500.0
    default_url_policies: list[dict] = field(default_factory=list)
    default_content_type_policies: list[dict] = field(default_factory=list)
    faults: Faults = field(default_factory=Faults)
    faults_endpoint: bool = False
    # Appended to Chromium's user agent on every page request (waggle_capture/useragent.py).
    user_agent_suffix: str = field(default_factory=waggle_suffix)
    # wacz-auth signing (waggle_capture/signing.py): authsign URL, token, policy, trusted roots
    signer: SignerSettings = field(default_factory=SignerSettings)
