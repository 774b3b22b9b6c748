"""Full-page screenshots: whole page up to FULL_PAGE_MAX_CSS_PX, capped from the top beyond it,
with the cap recorded in the report and the WACZ (docs/capture-server.md, extension 2)."""

from __future__ import annotations

import json
import struct

from waggle_capture.formats import FULL_PAGE_MAX_CSS_PX
from tests.devstack.helpers import ALL_FORMATS, capture, s3_get, wacz_members

VIEWPORT = {"width": 400, "height": 300}


def _png_size(data: bytes) -> tuple[int, int]:
    return struct.unpack(">II", data[16:24])


def _webp_size(data: bytes) -> tuple[int, int]:
    assert data[:4] == b"RIFF" and data[8:12] == b"WEBP"
    if data[12:16] == b"VP8 ":  # lossy: 14-bit dimensions after the frame tag and start code
        w, h = struct.unpack("<HH", data[26:30])
        return w & 0x3FFF, h & 0x3FFF
    if data[12:16] == b"VP8X":  # extended: canvas width − 1 and height − 1, 24 bits each
        return int.from_bytes(data[24:27], "little") + 1, int.from_bytes(data[27:30], "little") + 1
    raise AssertionError(f"unexpected WebP chunk {data[12:16]!r}")


def test_tall_page_is_capped_and_says_so(capture_server, test_site, s3_server):
    """/page is a 5,000 px tall document: the shots stop at the cap, the report and the WACZ
    record the document's height and the cap."""
    body = capture(capture_server, url=test_site.url("/page"), captureFormats=ALL_FORMATS, fullPage=True,
                   viewport=VIEWPORT).json()
    rep = body["report"]
    assert rep["status"] == "success", rep
    shot = rep["screenshot"]
    assert shot["capped"] is True and shot["capturedHeightPx"] == FULL_PAGE_MAX_CSS_PX == shot["maxHeightPx"]
    assert shot["documentHeightPx"] > 5000
    assert _png_size(s3_get(s3_server, rep["artifacts"]["png"])) == (400, FULL_PAGE_MAX_CSS_PX)
    assert _webp_size(s3_get(s3_server, rep["artifacts"]["webp"])) == (400, FULL_PAGE_MAX_CSS_PX)
    package = json.loads(wacz_members(s3_get(s3_server, rep["artifacts"]["wacz"]))["datapackage.json"])
    assert package["browserhive:capture"]["screenshot"] == shot


def test_short_page_is_whole_and_viewport_restored(capture_server, test_site, s3_server):
    body = capture(capture_server, url=test_site.url("/other"), captureFormats={**ALL_FORMATS, "wacz": False},
                   fullPage=True, viewport=VIEWPORT, devicePixelRatios=[2]).json()
    rep = body["report"]
    assert rep["status"] == "success", rep
    assert rep["screenshot"]["capped"] is False and rep["screenshot"]["capturedHeightPx"] == 300
    assert _png_size(s3_get(s3_server, rep["artifacts"]["png"])) == (800, 600)


def test_viewport_shot_has_no_screenshot_entry(capture_server, test_site, s3_server):
    rep = capture(capture_server, url=test_site.url("/page"), captureFormats={**ALL_FORMATS, "wacz": False},
                  viewport=VIEWPORT).json()["report"]
    assert "screenshot" not in rep
    assert _png_size(s3_get(s3_server, rep["artifacts"]["png"])) == (400, 300)
