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

# The title and (when asked) the links in one round trip: [document.title, links | null].
TITLE_AND_LINKS_JS = """(withLinks) => {
  if (!withLinks) return [document.title, null];
  const seen = new Set(); const out = [];
  for (const a of document.querySelectorAll("a[href]")) {
    const href = a.href;
    if (!/^https?:/i.test(href) || seen.has(href)) continue;
    seen.add(href);
    out.push({ href, text: (a.innerText || a.textContent || "").trim().slice(0, 200), rel: a.getAttribute("rel") });
  }
  return [document.title, out];
}"""


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
    title, links = await asyncio.wait_for(page.evaluate(TITLE_AND_LINKS_JS, run.formats["links"]),
                                          run.op_timeout(ctx.settings.operation_ms))
    links_at = datetime.now(timezone.utc)
    await write_screenshots(ctx, run, page, cdp)
    await write_dom_formats(ctx, run, page, cdp, doc_url, links, links_at)
    return title, document


async def write_screenshots(ctx: Ctx, run: Run, page: Page, cdp) -> None:
    """png (Playwright) and webp (CDP), full page when the request says ``fullPage``."""
    full = bool(run.req.get("fullPage"))
    if run.formats["png"]:
        png = await page.screenshot(full_page=full, timeout=run.op_timeout(ctx.settings.operation_ms) * 1000)
        upload_soon(ctx, run, "png", png)
    if run.formats["webp"]:
        shot = await asyncio.wait_for(cdp.send("Page.captureScreenshot", {
            "format": "webp", "captureBeyondViewport": full}), run.op_timeout(ctx.settings.operation_ms))
        upload_soon(ctx, run, "webp", base64.b64decode(shot["data"]))


async def write_dom_formats(ctx: Ctx, run: Run, page: Page, cdp, doc_url: str, links: list | None,
                            links_at: datetime) -> None:
    """html (serialised DOM), links (``.links.json``, taken at ``links_at``) and mhtml."""
    fmts = run.formats
    if fmts["html"]:
        html = await asyncio.wait_for(page.content(), run.op_timeout(ctx.settings.operation_ms))
        upload_soon(ctx, run, "html", html.encode("utf-8"))
    if fmts["links"]:
        upload_soon(ctx, run, "links", links_document(run, doc_url, links, links_at))
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
