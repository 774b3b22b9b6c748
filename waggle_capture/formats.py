"""The page formats (contracts.md §B.1 step "write formats"): png, webp, html, links, mhtml.

Each format is taken from the settled page and handed to :func:`uploads.upload_soon`, so its
write overlaps the next format (the artifacts keep the order png → webp → html → links → mhtml).
The title and links are extracted first (their text depends on layout) and read while the
other formats are taken; with ``fullPage`` the two screenshots are taken together and the DOM
is serialised meanwhile (CDP-only shots, nothing injected into the page). A document withheld
by a policy gets no page format at all.
"""

from __future__ import annotations

import asyncio
import base64
import json
from datetime import datetime, timezone
from typing import Any

from playwright.async_api import JSHandle, Page

from waggle_capture.recorder import Recorder
from waggle_capture.state import Ctx, Run, iso
from waggle_capture.uploads import upload_soon

# The title, (when asked) the links and the document's height in one round trip:
# [document.title, the links as pretty-printed JSON text | null, height in CSS px]. The links
# travel as one string (Playwright's by-value serialisation of ~14,000 small objects took 2–3 s on
# the Python docs' contents.html, the string 0.3 s), indented by V8 exactly as json.dumps(indent=2)
# would: :func:`links_document` splices it into ``.links.json`` as it is (Python's indenting
# encoder is pure Python, 0.2 s for those links). A text cut at 200 UTF-16 units drops a split
# surrogate pair's first half, and toWellFormed() replaces any other lone surrogate (U+FFFD), so
# the text is always valid UTF-8.
TITLE_AND_LINKS_JS = """(withLinks) => {
  const root = document.documentElement;
  const height = Math.max(root ? root.scrollHeight : 0, document.body ? document.body.scrollHeight : 0);
  if (!withLinks) return [document.title, null, height];
  const seen = new Set(); const out = [];
  for (const a of document.querySelectorAll("a[href]")) {
    const href = a.href;
    if (!/^https?:/i.test(href) || seen.has(href)) continue;
    seen.add(href);
    let text = (a.innerText || a.textContent || "").trim().slice(0, 200);
    if (/[\\uD800-\\uDBFF]$/.test(text)) text = text.slice(0, -1);
    out.push({ href, text: text.toWellFormed(), rel: a.getAttribute("rel") });
  }
  return [document.title, JSON.stringify(out, null, 2), height];
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
    await recorder.handled(doc_url, run.op_timeout(ctx.settings.operation_ms))
    withheld = document_withheld(run, recorder, doc_url)
    document: dict[str, Any] = {"url": doc_url}
    if withheld:
        document["withheld"] = withheld
    run.step = "write-formats"
    if withheld:
        return None, document
    op_s = run.op_timeout(ctx.settings.operation_ms)
    # Extracted in the page now, from the settled layout; the links' text (2 MB on a long page,
    # 0.2 s through Playwright) is read while the other formats are taken.
    # (The handle is not disposed: the page is closed after every capture, and a dispose after
    # a timeout would only delay the answer.)
    found = await asyncio.wait_for(page.evaluate_handle(TITLE_AND_LINKS_JS, run.formats["links"]), op_s)
    title, height = await asyncio.wait_for(found.evaluate("r => [r[0], r[2]]"), op_s)
    links_at = datetime.now(timezone.utc)
    run.mark("title-links")
    links = [_write_links(ctx, run, found, doc_url, links_at)] if run.formats["links"] else []
    if run.req.get("fullPage") and (run.formats["png"] or run.formats["webp"]):
        # CDP-only shots change nothing in the DOM: the serialisations run meanwhile (the
        # renderer's main thread serialises while the browser process encodes the images).
        await together(_full_page_shots(ctx, run, cdp, int(height or 0)), write_dom_formats(ctx, run, page, cdp),
                       *links)
    else:
        # Playwright's viewport screenshot injects a style element (caret hiding) while it
        # shoots: the DOM is serialised after it, not meanwhile.
        await together(_shots_then_dom(ctx, run, page, cdp), *links)
    run.mark("page-formats")
    return title, document


async def _write_links(ctx: Ctx, run: Run, found: JSHandle, doc_url: str, links_at: datetime) -> None:
    """``.links.json`` and the answer's links from ``found`` (:data:`TITLE_AND_LINKS_JS`' result)."""
    links_json = await asyncio.wait_for(found.evaluate("r => r[1]"), run.op_timeout(ctx.settings.operation_ms))
    run.links = json.loads(links_json)
    upload_soon(ctx, run, "links", links_document(run, doc_url, links_json, links_at))


async def _shots_then_dom(ctx: Ctx, run: Run, page: Page, cdp) -> None:
    await write_screenshots(ctx, run, page, cdp)
    await write_dom_formats(ctx, run, page, cdp)


async def write_screenshots(ctx: Ctx, run: Run, page: Page, cdp) -> None:
    """png and webp of the viewport (full-page shots: :func:`_full_page_shots`)."""
    fmts = run.formats
    if fmts["png"]:
        png = await page.screenshot(timeout=run.op_timeout(ctx.settings.operation_ms) * 1000)
        _shot_taken(ctx, run, "png", png)
    if fmts["webp"]:
        _shot_taken(ctx, run, "webp", await _cdp_shot(ctx, run, cdp, "webp"))


async def _full_page_shots(ctx: Ctx, run: Run, cdp, doc_height: int) -> None:
    """png and webp of the document from its top down to ``doc_height`` (CSS px) capped at
    :data:`FULL_PAGE_MAX_CSS_PX` (``run.screenshot`` says so)."""
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
        # Both asked at once: Chromium encodes them on two threads of its pool (about 30 % less
        # than one after the other on the docs' long pages).
        fmts = [f for f in ("png", "webp") if run.formats[f]]
        shots = await together(*(_cdp_shot(ctx, run, cdp, f) for f in fmts))
        for fmt, data in zip(fmts, shots):
            _shot_taken(ctx, run, fmt, data)
    finally:
        await asyncio.wait_for(cdp.send("Emulation.setDeviceMetricsOverride", {**metrics, "height": viewport["height"]}),
                               run.op_timeout(ctx.settings.operation_ms))


def _shot_taken(ctx: Ctx, run: Run, fmt: str, data: bytes) -> None:
    """Write screenshot ``fmt`` as its own artifact (v12) and, with ``screenshotsInWacz``
    (extension 15), keep it for the WACZ's resource records (:func:`package.screenshot_records`)."""
    upload_soon(ctx, run, fmt, data)
    if run.req.get("screenshotsInWacz"):
        run.shots[fmt] = data


async def together(*aws) -> list:
    """Await ``aws`` concurrently; their results in order. The first failure cancels the others
    and is raised as it is (the capture's failure classes read its type)."""
    tasks = [asyncio.ensure_future(a) for a in aws]
    try:
        return await asyncio.gather(*tasks)
    except BaseException:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


async def _cdp_shot(ctx: Ctx, run: Run, cdp, fmt: str) -> bytes:
    # optimizeForSpeed: a faster zlib level for PNG (still lossless, ~25 % larger, half the time).
    params = {"format": fmt, "optimizeForSpeed": True} if fmt == "png" else {"format": fmt}
    shot = await asyncio.wait_for(cdp.send("Page.captureScreenshot", params), run.op_timeout(ctx.settings.operation_ms))
    return base64.b64decode(shot["data"])


async def write_dom_formats(ctx: Ctx, run: Run, page: Page, cdp) -> None:
    """html (serialised DOM) and mhtml (``Page.captureSnapshot``)."""
    fmts = run.formats
    if fmts["html"]:
        html = await asyncio.wait_for(page.content(), run.op_timeout(ctx.settings.operation_ms))
        upload_soon(ctx, run, "html", html.encode("utf-8"))
    if fmts["mhtml"]:
        snap = await asyncio.wait_for(cdp.send("Page.captureSnapshot", {"format": "mhtml"}),
                                      run.op_timeout(ctx.settings.operation_ms))
        upload_soon(ctx, run, "mhtml", snap["data"].encode("utf-8"))


def links_document(run: Run, doc_url: str, links_json: str, links_at: datetime) -> bytes:
    """The ``.links.json`` bytes (contracts.md §B.4), pretty-printed as ``json.dumps(indent=2,
    ensure_ascii=False)`` would, with ``links_json`` (a JSON array indented by 2, from
    :data:`TITLE_AND_LINKS_JS`) spliced in as it is: JSON strings hold no raw newline, so
    indenting every line by 2 more nests it."""
    doc: dict[str, Any] = {"taskId": run.task_id, "url": run.url, "finalUrl": doc_url, "labels": run.labels}
    if run.req.get("correlationId") is not None:
        doc["correlationId"] = run.req["correlationId"]
    doc["capturedAt"] = iso(links_at)
    head = json.dumps(doc, indent=2, ensure_ascii=False)
    text = head[:-2] + ',\n  "links": ' + links_json.replace("\n", "\n  ") + "\n}\n"
    return text.encode("utf-8")


def document_withheld(run: Run, recorder: Recorder, doc_url: str) -> str | None:
    """Why the main document gets no page format (a URL or content-type policy), else None."""
    m = run.policies.match_url(doc_url)
    if m is not None:
        return {"no-body": "url-policy", "no-archive": "no-archive", "deny": "deny"}[m.action]
    for ex in reversed(recorder.exchanges):
        if ex.url == doc_url and ex.resource_type == "document" and ex.withheld == "content-type":
            return "content-type"
    return None
