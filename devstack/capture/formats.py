"""The page formats (contracts.md §B.1 step "write formats"): png → webp → html → links → mhtml.

Each format is taken from the settled page and handed to :func:`uploads.upload_soon`, so its
write overlaps the next format. A document withheld by a policy gets no page format at all.
"""

from __future__ import annotations

import asyncio
import base64
import json
from datetime import datetime, timezone
from typing import Any

from playwright.async_api import Page

from devstack.capture.recorder import Recorder
from devstack.capture.state import Ctx, Run, iso
from devstack.capture.uploads import upload_soon

# The title, (when asked) the links and the document's height in one round trip:
# [document.title, JSON text of the links | null, height in CSS px]. The links travel as one JSON
# string: Playwright's by-value serialisation of ~14,000 small objects took 2–3 s on the Python
# docs' contents.html, the string 0.3 s (same result).
TITLE_AND_LINKS_JS = """(withLinks) => {
  const root = document.documentElement;
  const height = Math.max(root ? root.scrollHeight : 0, document.body ? document.body.scrollHeight : 0);
  if (!withLinks) return [document.title, null, height];
  const seen = new Set(); const out = [];
  for (const a of document.querySelectorAll("a[href]")) {
    const href = a.href;
    if (!/^https?:/i.test(href) || seen.has(href)) continue;
    seen.add(href);
    out.push({ href, text: (a.innerText || a.textContent || "").trim().slice(0, 200), rel: a.getAttribute("rel") });
  }
  return [document.title, JSON.stringify(out), height];
}"""

# Full-page screenshots stop at this height (CSS px, ≈ 5 screens of 800 px): raster and encoding
# grow with the area (the docs' contents.html, 314,532 px tall, timed out after 10 s; 8,192 px
# still cost 2–4 s on a loaded 2-core machine, 4,096 px about 0.5–1.5 s), WebP cannot exceed
# 16,383 device px, and the WACZ, HTML and MHTML hold the whole page. The report says when.
FULL_PAGE_MAX_CSS_PX = 4096
WEBP_MAX_DEVICE_PX = 16383


async def write_formats(ctx: Ctx, run: Run, page: Page, cdp, recorder: Recorder) -> tuple[str | None, dict[str, Any]]:
    """Take every page format asked for; returns ``(title, document)`` where ``document`` is the
    report's ``{url, withheld?}`` (title None when the document is withheld)."""
    doc_url = page.url
    withheld = document_withheld(run, recorder, doc_url)
    document: dict[str, Any] = {"url": doc_url}
    if withheld:
        document["withheld"] = withheld
    run.step = "write-formats"
    if withheld:
        return None, document
    title, links_json, height = await asyncio.wait_for(page.evaluate(TITLE_AND_LINKS_JS, run.formats["links"]),
                                                       run.op_timeout(ctx.settings.operation_ms))
    links = json.loads(links_json) if links_json is not None else None
    links_at = datetime.now(timezone.utc)
    run.mark("title-links")
    await write_screenshots(ctx, run, page, cdp, int(height or 0))
    run.mark("screenshots")
    await write_dom_formats(ctx, run, page, cdp, doc_url, links, links_at)
    run.mark("dom-formats")
    return title, document


async def write_screenshots(ctx: Ctx, run: Run, page: Page, cdp, doc_height: int) -> None:
    """png and webp of the viewport, or with ``fullPage`` of the document from its top down to
    ``doc_height`` (CSS px) capped at :data:`FULL_PAGE_MAX_CSS_PX` (``run.screenshot`` says so)."""
    fmts = run.formats
    if not (fmts["png"] or fmts["webp"]):
        return
    if not run.req.get("fullPage"):
        if fmts["png"]:
            png = await page.screenshot(timeout=run.op_timeout(ctx.settings.operation_ms) * 1000)
            upload_soon(ctx, run, "png", png)
        if fmts["webp"]:
            upload_soon(ctx, run, "webp", await _cdp_shot(ctx, run, cdp, "webp"))
        return
    await _full_page_shots(ctx, run, cdp, doc_height)


async def _full_page_shots(ctx: Ctx, run: Run, cdp, doc_height: int) -> None:
    # The viewport is made as tall as the shot for the two captures and put back after: a plain
    # viewport capture of a tall viewport is about twice as fast as captureBeyondViewport.
    viewport = run.req.get("viewport") or ctx.settings.viewport
    dprs = run.req.get("devicePixelRatios") or ctx.settings.device_pixel_ratios
    cap = min(FULL_PAGE_MAX_CSS_PX, WEBP_MAX_DEVICE_PX // dprs[-1])
    height = max(viewport["height"], min(doc_height, cap))
    run.screenshot = {"fullPage": True, "documentHeightPx": max(doc_height, viewport["height"]),
                      "capturedHeightPx": height, "capped": doc_height > height, "maxHeightPx": cap}
    metrics = {"width": viewport["width"], "deviceScaleFactor": dprs[-1], "mobile": False}
    await asyncio.wait_for(cdp.send("Emulation.setDeviceMetricsOverride", {**metrics, "height": height}),
                           run.op_timeout(ctx.settings.operation_ms))
    try:
        for fmt in ("png", "webp"):
            if run.formats[fmt]:
                upload_soon(ctx, run, fmt, await _cdp_shot(ctx, run, cdp, fmt))
    finally:
        await asyncio.wait_for(cdp.send("Emulation.setDeviceMetricsOverride", {**metrics, "height": viewport["height"]}),
                               run.op_timeout(ctx.settings.operation_ms))


async def _cdp_shot(ctx: Ctx, run: Run, cdp, fmt: str) -> bytes:
    # optimizeForSpeed: a faster zlib level for PNG (still lossless, ~25 % larger, half the time).
    params = {"format": fmt, "optimizeForSpeed": True} if fmt == "png" else {"format": fmt}
    shot = await asyncio.wait_for(cdp.send("Page.captureScreenshot", params), run.op_timeout(ctx.settings.operation_ms))
    return base64.b64decode(shot["data"])


async def write_dom_formats(ctx: Ctx, run: Run, page: Page, cdp, doc_url: str, links: list | None,
                            links_at: datetime) -> None:
    """html (serialised DOM), links (``.links.json``, taken at ``links_at``) and mhtml."""
    fmts = run.formats
    if fmts["html"]:
        html = await asyncio.wait_for(page.content(), run.op_timeout(ctx.settings.operation_ms))
        upload_soon(ctx, run, "html", html.encode("utf-8"))
    if fmts["links"]:
        upload_soon(ctx, run, "links", links_document(run, doc_url, links, links_at))
        run.links = links
    if fmts["mhtml"]:
        snap = await asyncio.wait_for(cdp.send("Page.captureSnapshot", {"format": "mhtml"}),
                                      run.op_timeout(ctx.settings.operation_ms))
        upload_soon(ctx, run, "mhtml", snap["data"].encode("utf-8"))


def links_document(run: Run, doc_url: str, links: list | None, links_at: datetime) -> bytes:
    """The ``.links.json`` bytes (contracts.md §B.4)."""
    doc: dict[str, Any] = {"taskId": run.task_id, "url": run.url, "finalUrl": doc_url, "labels": run.labels}
    if run.req.get("correlationId") is not None:
        doc["correlationId"] = run.req["correlationId"]
    doc["capturedAt"] = iso(links_at)
    doc["links"] = links
    return (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def document_withheld(run: Run, recorder: Recorder, doc_url: str) -> str | None:
    """Why the main document gets no page format (a URL or content-type policy), else None."""
    m = run.policies.match_url(doc_url)
    if m is not None:
        return {"no-body": "url-policy", "no-archive": "no-archive", "deny": "deny"}[m.action]
    for ex in reversed(recorder.exchanges):
        if ex.url == doc_url and ex.resource_type == "document" and ex.withheld == "content-type":
            return "content-type"
    return None
