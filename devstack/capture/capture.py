"""One capture, from address check to the manifest (contracts.md §A.3–§A.9, §B).

:func:`run_capture` takes a validated request and returns the 200 body
``{taskId, report, manifest: {location} | {error}}``. Every step has a deadline: the whole task
is bounded by ``task_total_ms`` (``timeout`` with ``step``), a page load by ``page_load_ms``,
every other browser operation by ``operation_ms``, behaviors by ``behaviors_ms`` and the
manifest write by ``manifest_ms`` on top — so a capture always ends.

Order of work (§B.1): check address → start recording (fresh context; preload scripts; deny
gate) → load pages (one load per device pixel ratio; settle wait; behaviors with ``__bh``) →
write formats png → webp → html → links → mhtml → package WACZ → upload WACZ → manifest.

What keeps a capture short (issue 8 item 5): page-format uploads run concurrently with the next
format and with WACZ packaging (the WACZ is uploaded only after all of them were written); the
browser context is closed after the response — the proxy is sealed first, so nothing reaches a
site after the capture ended — and the next context is prepared meanwhile (:mod:`.spare`); the
next capture waits for that work (:meth:`Ctx.wait_idle`) before it starts.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio.to_thread
from playwright.async_api import BrowserContext, Page
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import TimeoutError as PlaywrightTimeout

from devstack.capture import names
from devstack.capture.browser import BrowserHolder, BrowserUnavailable
from devstack.capture.dismiss import DismissFailed, dismiss
from devstack.capture.policies import Policies
from devstack.capture.proxy import GuardedProxy, checked_addresses
from devstack.capture.recorder import Recorder
from devstack.capture.settings import BUILD, SOFTWARE, ServerSettings
from devstack.capture.sink import HttpSink, S3Sink, SinkError
from devstack.capture.spare import Opened, Spare, open_context
from devstack.capture.warc import cdxj_index, reason_phrase, write_warc
from devstack.capture.wacz import Member, build_wacz, pages_jsonl
from ledger.hostguard import HostRefused

log = logging.getLogger("devstack.capture")

CONFORMS_TO = "https://uraitakahito.github.io/browserhive-specs/wacz-profile/1.12.0/"

# The behavior host object, evaluated before behaviors and archived byte-for-byte as
# behaviors/runtime.js. Called with [opts, budgetMs].
RUNTIME_JS = """([opts, budgetMs]) => {
  const started = Date.now();
  const reports = [];
  Object.defineProperty(globalThis, "__bhReports", { value: reports, configurable: true });
  globalThis.__bh = {
    opts,
    get remainingMs() { return Math.max(0, budgetMs - (Date.now() - started)); },
    report(id, data) { reports.push({ id: String(id), elapsedMs: Date.now() - started, data }); },
  };
}
"""

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


class BudgetExhausted(Exception):
    """A wait was cut short because the whole-task budget ran out (→ ``timeout`` with ``step``)."""


class CaptureFailure(Exception):
    """Ends a capture early with ``status`` and ``errorDetails``."""

    def __init__(self, status: str, kind: str, message: str, **details: Any):
        super().__init__(message)
        self.status = status
        self.details = {"type": kind, "message": message, **{k: v for k, v in details.items() if v is not None}}


def _iso(dt: datetime) -> str:
    return dt.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class Ctx:
    """What the server holds across captures."""

    settings: ServerSettings
    browser: BrowserHolder
    proxy: GuardedProxy
    s3: S3Sink | None
    shared_context: BrowserContext | None = None
    captures: int = 0
    spare: Spare = field(default_factory=Spare)
    after: asyncio.Task | None = None  # teardown of the last capture + the next spare

    async def wait_idle(self, timeout_s: float = 30.0) -> None:
        """Wait (bounded) until the last capture's teardown and spare preparation are done."""
        task, self.after = self.after, None
        if task is not None and not task.done():
            done, _ = await asyncio.wait([task], timeout=timeout_s)
            if not done:
                task.cancel()

    async def aclose(self) -> None:
        """Stop background work and close the spare and the shared context (server shutdown)."""
        if self.after is not None:
            self.after.cancel()
            await asyncio.wait([self.after], timeout=5)
            self.after = None
        await self.spare.discard()
        if self.shared_context is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.shared_context.close(), 5)
            self.shared_context = None


@dataclass
class Run:
    """State of one capture."""

    req: dict[str, Any]
    task_id: str
    url: str
    labels: list[str]
    stem: str
    sink: S3Sink | HttpSink
    policies: Policies
    started: datetime
    t0: float
    deadline: float
    step: str = "check-address"
    artifacts: dict[str, str] = field(default_factory=dict)
    formats: dict[str, bool] = field(default_factory=dict)
    uploads: list[asyncio.Task] = field(default_factory=list)  # page formats still being written
    links: list[dict] | None = None  # the .links.json items, answered inline (waggle extension)

    def remaining_s(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def op_timeout(self, ms: int) -> float:
        return max(0.05, min(ms / 1000, self.remaining_s()))


async def run_capture(ctx: Ctx, req: dict[str, Any]) -> dict[str, Any]:
    """Run one capture; returns the ``CaptureResponse`` body (always, never raises).

    Leaves ``ctx.after`` running (context teardown, next spare); the next call waits for it.
    That wait counts against this task's budget, so a hung teardown cannot push the answer past
    the caller's deadline."""
    accepted = time.monotonic()
    await ctx.wait_idle()
    s = ctx.settings
    task_id = str(uuid.uuid4())
    labels = names.clean_labels(req.get("labels"))
    sink: S3Sink | HttpSink
    if req.get("artifactSink"):
        sink = HttpSink(req["artifactSink"]["url"], req["artifactSink"]["token"])
    else:
        assert ctx.s3 is not None  # the route refuses with 400 otherwise
        sink = ctx.s3
    budget_ms = s.faults.task_total_ms or s.task_total_ms
    url_policies = req["urlPolicies"] if "urlPolicies" in req else s.default_url_policies
    ct_policies = req["contentTypePolicies"] if "contentTypePolicies" in req else s.default_content_type_policies
    run = Run(req=req, task_id=task_id, url=req["url"].strip(), labels=labels,
              stem=names.stem(task_id, req.get("correlationId"), labels), sink=sink,
              policies=Policies(url_policies, ct_policies), started=datetime.now(timezone.utc),
              t0=accepted, deadline=accepted + budget_ms / 1000,
              formats=req["captureFormats"])
    report: dict[str, Any] = {"taskId": task_id}
    if req.get("correlationId") is not None:
        report["correlationId"] = req["correlationId"]
    report.update({"url": run.url, "labels": labels})
    processing_ms: int | None = None
    try:
        body = await asyncio.wait_for(_capture(ctx, run), timeout=max(0.01, run.remaining_s()))
        report.update(body)
        report["artifacts"] = dict(run.artifacts)
    except (asyncio.TimeoutError, BudgetExhausted) as e:
        if isinstance(e, BudgetExhausted) or run.remaining_s() <= 0.1:  # the whole-task budget
            report.update(status="timeout", errorDetails={
                "type": "timeout", "message": f"the task budget of {budget_ms} ms ran out during {run.step}",
                "timeoutMs": budget_ms, "step": run.step})
        else:  # one operation's own deadline
            report.update(status="timeout", errorDetails={
                "type": "timeout", "message": f"a browser operation exceeded {s.operation_ms} ms during {run.step}",
                "timeoutMs": s.operation_ms})
    except PlaywrightTimeout as e:
        report.update(status="timeout", errorDetails={
            "type": "timeout", "message": str(e).splitlines()[0][:500], "timeoutMs": s.operation_ms})
    except PlaywrightError as e:
        msg = str(e).splitlines()[0][:500]
        closed = any(w in msg.lower() for w in ("closed", "disconnect", "crash"))
        report.update(status="failed", errorDetails={"type": "connection" if closed else "internal", "message": msg})
    except CaptureFailure as f:
        report.update(status=f.status, errorDetails=f.details)
        if f.status == "http_error":
            report["httpStatusCode"] = f.details["httpStatusCode"]
        if f.details["type"] == "connection" and run.step == "check-address":
            processing_ms = 0
    except Exception as e:  # noqa: BLE001 — a capture must always end with a report
        log.exception("capture %s failed", task_id)
        report.update(status="failed", errorDetails={"type": "internal", "message": f"{type(e).__name__}: {e}"[:500]})
    if report["status"] != "success":
        report["artifacts"] = {}
    report["timestamp"] = _iso(datetime.now(timezone.utc))
    report["captureProcessingTimeMs"] = (
        processing_ms if processing_ms is not None else int((time.monotonic() - run.t0) * 1000))
    report = _ordered(report)
    manifest = await _write_manifest(ctx, run, report)
    answer: dict[str, Any] = {"taskId": task_id, "report": report, "manifest": manifest}
    if report["status"] == "success" and run.links is not None and "links" in report["artifacts"]:
        answer["links"] = run.links  # waggle extension: the .links.json items inline (docs/internals.md)
    return answer


_ORDER = ["taskId", "correlationId", "url", "labels", "status", "httpStatusCode", "timestamp",
          "captureProcessingTimeMs", "artifacts", "waczStats", "completeness", "errorDetails", "settle",
          "document", "windowsNotOpened"]


def _ordered(report: dict[str, Any]) -> dict[str, Any]:
    return {k: report[k] for k in _ORDER if k in report} | {k: v for k, v in report.items() if k not in _ORDER}


async def _write_manifest(ctx: Ctx, run: Run, report: dict[str, Any]) -> dict[str, str]:
    name = names.file_name(run.stem, "manifest")
    data = (json.dumps(report, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    if ctx.settings.faults.manifest_fail:
        return {"error": f"{run.sink.describe()}/{name}: forced manifest write failure (fault knob)"}
    try:
        loc = await asyncio.wait_for(run.sink.put(name, data, names.EXTENSIONS["manifest"][1]),
                                     ctx.settings.manifest_ms / 1000)
        return {"location": loc}
    except asyncio.TimeoutError:
        return {"error": f"{run.sink.describe()}/{name}: manifest write took longer than {ctx.settings.manifest_ms} ms"}
    except SinkError as e:
        return {"error": str(e)}


async def _upload(ctx: Ctx, run: Run, fmt: str, data: bytes) -> None:
    name = names.file_name(run.stem, fmt)
    try:
        loc = await run.sink.put(name, data, names.EXTENSIONS[fmt][1])
    except SinkError as e:
        raise CaptureFailure("failed", "artifact_sink", str(e)) from e
    run.artifacts[fmt] = loc
    if ctx.settings.faults.crash_during_upload:
        log.error("fault knob crash_during_upload: exiting after uploading %s", name)
        os._exit(137)


def _upload_soon(ctx: Ctx, run: Run, fmt: str, data: bytes) -> None:
    """Start writing a page format while the capture goes on; :func:`_uploads_done` collects it."""
    task = asyncio.ensure_future(_upload(ctx, run, fmt, data))
    task.add_done_callback(lambda t: t.cancelled() or t.exception())  # retrieved; raised in _uploads_done
    run.uploads.append(task)


async def _uploads_done(run: Run) -> None:
    """Wait for every started page-format upload; raises the first failure (``artifact_sink``).
    ``run.artifacts`` keeps the format order (png → webp → html → links → mhtml)."""
    tasks, run.uploads = run.uploads, []
    if not tasks:
        return
    await asyncio.wait(tasks)
    for t in tasks:
        if t.exception() is not None:
            raise t.exception()  # type: ignore[misc]
    written = dict(run.artifacts)
    run.artifacts.clear()
    run.artifacts.update({f: written[f] for f in names.EXTENSIONS if f in written})


async def _capture(ctx: Ctx, run: Run) -> dict[str, Any]:
    s = ctx.settings
    faults = s.faults
    if faults.slow_ms:
        await asyncio.sleep(faults.slow_ms / 1000)
    if faults.error_type:
        if faults.error_type == "http":
            raise CaptureFailure("http_error", "http", "HTTP 503 (forced by fault knob)",
                                 httpStatusCode=503, httpStatusText="Service Unavailable")
        status = "timeout" if faults.error_type == "timeout" else "failed"
        raise CaptureFailure(status, faults.error_type, f"forced {faults.error_type} failure (fault knob)")

    # check-address: the target must pass the private-host guard before anything starts.
    parts = urlsplit(run.url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise CaptureFailure("failed", "internal", "url is not allowed")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        addresses = await anyio.to_thread.run_sync(checked_addresses, parts.hostname, port, s.allow_private)
    except HostRefused as e:
        log.info("refused %s: %s", run.url, e.reason)
        raise CaptureFailure("failed", "internal", "url is not allowed") from e
    except (OSError, ValueError) as e:
        raise CaptureFailure("failed", "internal", f"net::ERR_NAME_NOT_RESOLVED ({e})") from e
    first = run.policies.match_url(run.url)
    if first is not None and first.action == "deny":
        return {"status": "success", "document": {"withheld": "deny"}, "windowsNotOpened": 0}

    if faults.crash_browser:
        faults.crash_browser = False
        await ctx.browser.kill_for_test()
        await asyncio.sleep(0.5)
    ctx.browser.max_rss_mb = faults.max_rss_mb or s.max_rss_mb
    ctx.browser.recycle_every = faults.recycle_every or s.recycle_every
    try:
        browser = await ctx.browser.ensure()
    except BrowserUnavailable as e:
        raise CaptureFailure("failed", "connection", str(e)) from e

    run.step = "start-recording"
    req = run.req
    dprs = req.get("devicePixelRatios") or s.device_pixel_ratios
    viewport = req.get("viewport") or s.viewport
    max_resp = min(int(req.get("maxResponseBytes") or s.max_response_bytes), s.max_response_bytes)
    recorder = Recorder(run.policies, max_resp, s.max_task_bytes, max_pending=s.max_pending_requests)
    shared = req.get("session") == "shared"
    headers = {"Accept-Language": req["acceptLanguage"]} if (req.get("acceptLanguage") or "").strip() else None
    ctx.proxy.begin_capture(
        deny=lambda u: (m := run.policies.match_url(u)) is not None and m.action == "deny",
        on_denied=lambda u, method: recorder.record_denied(u, method, run.policies.match_url(u).pattern),
        checked={(parts.hostname, port): addresses},  # the target was just checked: no second lookup
    )
    context: BrowserContext | None = None
    page: Page | None = None
    gate = None
    try:
        try:
            if ctx.shared_context is not None and ctx.shared_context.browser is not browser:
                ctx.shared_context = None  # its browser was relaunched or recycled
            if shared and ctx.shared_context is not None:
                context = ctx.shared_context
                page = await asyncio.wait_for(context.new_page(), run.op_timeout(s.operation_ms))
                cdp = await asyncio.wait_for(context.new_cdp_session(page), run.op_timeout(s.operation_ms))
            else:
                opened: Opened | None = await ctx.spare.take(browser, viewport, dprs[-1])
                if opened is None:
                    opened = await open_context(browser, ctx.proxy.url, viewport, dprs[-1],
                                                run.op_timeout(s.operation_ms))
                context, page, cdp = opened.context, opened.page, opened.cdp
                if shared:
                    ctx.shared_context = context
            if headers:
                await asyncio.wait_for(context.set_extra_http_headers(headers), run.op_timeout(s.operation_ms))
            for script in req.get("preload") or []:
                await context.add_init_script(script=script["source"])
            if run.policies.has_deny():
                gate = _deny_gate(run, recorder)
                await context.route("**/*", gate)
            recorder.attach(context)
        except (PlaywrightError, asyncio.TimeoutError) as e:
            raise CaptureFailure("failed", "connection", f"browser is not usable: {e}"[:500]) from e
        windows = {"refused": 0}

        def on_popup(p: Page) -> None:
            windows["refused"] += 1
            asyncio.ensure_future(p.close())

        page.on("popup", on_popup)
        return await _load_and_write(ctx, run, context, page, cdp, recorder, dprs, viewport, windows)
    finally:
        await _end(ctx, run, recorder)
        ctx.after = asyncio.ensure_future(_after(ctx, context, page, shared, gate))


def _deny_gate(run: Run, recorder: Recorder):
    async def gate(route) -> None:
        request = route.request
        m = run.policies.match_url(request.url)
        if m is not None and m.action == "deny":
            target = "page"
            try:
                target = "page" if request.frame.parent_frame is None else "iframe"
            except PlaywrightError:
                target = "worker"
            recorder.record_denied(request.url, request.method, m.pattern, request.resource_type, target)
            await route.abort("blockedbyclient")
        else:
            await route.fallback()
    return gate


async def _end(ctx: Ctx, run: Run, recorder: Recorder) -> None:
    """What must happen before the response: stop recording, seal the proxy (closes every
    connection and refuses new ones, so the page can no longer reach any site), count."""
    try:
        await recorder.stop(timeout_s=5)
    except Exception:  # noqa: BLE001 — a crashed browser cannot be stopped politely
        pass
    finally:
        for t in run.uploads:  # a capture that failed early: its writes end on their own
            t.cancel()
        await ctx.proxy.end_capture()
        ctx.browser.capture_done()


async def _after(ctx: Ctx, context, page, shared: bool, gate) -> None:
    """After the response: close the capture's context (a shared one: its page and deny gate)
    and, at the same time, measure the browser's memory and prepare the next context unless the
    browser is due for recycling (the next capture relaunches it first). Never raises."""
    await asyncio.gather(_close(context, page, shared, gate), _prepare(ctx))


async def _close(context, page, shared: bool, gate) -> None:
    try:
        if shared and context is not None and gate is not None:
            await asyncio.wait_for(context.unroute("**/*", gate), 5)
        if context is not None and not shared:
            await asyncio.wait_for(context.close(), 10)
        elif page is not None:
            await asyncio.wait_for(page.close(), 10)
    except Exception:  # noqa: BLE001 — a crashed browser cannot be closed politely
        pass


async def _prepare(ctx: Ctx) -> None:
    s = ctx.settings
    holder = ctx.browser
    browser = holder.browser
    if browser is None or not browser.is_connected():
        return
    try:
        await anyio.to_thread.run_sync(holder.measure_rss)
        if holder.browser is browser and not holder.due_for_recycling():
            await ctx.spare.fill(browser, ctx.proxy.url, s.viewport, s.device_pixel_ratios[-1], s.operation_ms / 1000)
    except Exception:  # noqa: BLE001 — preparation is an optimisation; the next capture opens its own
        log.debug("spare preparation failed", exc_info=True)


async def _trace(run: Run, page: Page, message: str) -> None:
    """``trace: true`` → a ``[bh]`` line in the page's own console (artifacts unchanged)."""
    if run.req.get("trace"):
        try:
            await asyncio.wait_for(page.evaluate("m => console.log(m)", f"[bh] {message}"), 2)
        except Exception:  # noqa: BLE001 — tracing never fails a capture
            pass


async def _settle(run: Run, recorder: Recorder, limits: dict[str, int], dpr: int) -> dict[str, Any]:
    """Wait until the network is quiet (≤ networkConcurrency in flight for quietMs), between
    minMs and maxMs after navigation returned; bounded by the task budget."""
    begin = time.monotonic()
    quiet_at: int | None = None
    ended = "deadline"
    while True:
        waited = (time.monotonic() - begin) * 1000
        idle_ms = (time.monotonic() - recorder.last_activity) * 1000
        quiet = len(recorder.inflight) <= limits["networkConcurrency"] and idle_ms >= limits["quietMs"]
        if quiet and quiet_at is None:
            quiet_at = int(waited)
        if not quiet:
            quiet_at = None
        if quiet and waited >= limits["minMs"]:
            ended = "quiet"
            break
        if waited >= limits["maxMs"] or run.remaining_s() < 0.5:
            break
        # Few enough in flight but not quiet yet: sleep until the quiet window would end (then
        # re-check) instead of polling, so the wait ends when the window does; else poll (50 ms).
        now = time.monotonic()
        until = min(begin + limits["maxMs"] / 1000, now + 0.05)
        if not quiet and len(recorder.inflight) <= limits["networkConcurrency"]:
            until = min(begin + limits["maxMs"] / 1000, recorder.last_activity + limits["quietMs"] / 1000)
        await asyncio.sleep(min(max(until - now, 0.002), 0.25, max(run.remaining_s() - 0.5, 0.002)))
    settle: dict[str, Any] = {
        "strategy": "fully-loaded", "endedBy": ended, "waitedMs": int((time.monotonic() - begin) * 1000),
        "devicePixelRatio": dpr, "limits": dict(limits), "load": {"atMs": 0}, "network": {}, "cpu": {}, "dom": {},
    }
    if quiet_at is not None:
        settle["network"]["quietAtMs"] = quiet_at
    return settle


async def _run_behaviors(run: Run, page: Page, cdp, behaviors: list[dict], budget_ms: int) -> list[dict]:
    opts = {b["id"]: b.get("options") for b in behaviors}
    await asyncio.wait_for(page.evaluate(RUNTIME_JS, [opts, budget_ms]), run.op_timeout(10_000))
    end = time.monotonic() + budget_ms / 1000
    errors: list[dict] = []
    for b in behaviors:
        left = min(end - time.monotonic(), run.remaining_s() - 1)
        if left <= 0:
            errors.append({"id": b["id"], "error": "behavior budget exhausted before it ran"})
            continue
        try:
            res = await asyncio.wait_for(cdp.send("Runtime.evaluate", {
                "expression": b["source"], "awaitPromise": True, "returnByValue": False}), left)
            if res.get("exceptionDetails"):
                desc = res["exceptionDetails"].get("exception", {}).get("description") or res["exceptionDetails"].get("text")
                errors.append({"id": b["id"], "error": str(desc)[:500]})
        except asyncio.TimeoutError:
            errors.append({"id": b["id"], "error": "behavior did not finish within its budget"})
    reports = await asyncio.wait_for(page.evaluate("() => globalThis.__bhReports || []"), run.op_timeout(5000))
    return reports + errors


async def _load_and_write(ctx: Ctx, run: Run, context: BrowserContext, page: Page, cdp, recorder: Recorder,
                          dprs: list[int], viewport: dict, windows: dict) -> dict[str, Any]:
    s = ctx.settings
    req = run.req
    delay = (req.get("operationDelayMs") or 0) / 1000
    limits = {**s.settle, **(req.get("loadWait") or {})}
    behaviors = req.get("behaviors") or []
    run.step = "load-pages"
    main_status: int | None = None
    settle: dict[str, Any] = {}
    behavior_records: list[dict] = []
    ran_behaviors = False
    dismissal: dict[str, Any] | None = None
    for i, dpr in enumerate(dprs):
        if i > 0:
            await cdp.send("Emulation.setDeviceMetricsOverride", {
                "width": viewport["width"], "height": viewport["height"], "deviceScaleFactor": dpr, "mobile": False})
        if delay:
            await asyncio.sleep(delay)
        try:
            response = await page.goto(run.url, wait_until="load", timeout=run.op_timeout(s.page_load_ms) * 1000)
        except PlaywrightTimeout as e:
            if run.remaining_s() <= 0.5:
                raise BudgetExhausted() from e
            raise CaptureFailure("timeout", "timeout", f"page load exceeded {s.page_load_ms} ms",
                                 timeoutMs=s.page_load_ms) from e
        except PlaywrightError as e:
            msg = str(e).splitlines()[0]
            kind = "connection" if ("closed" in msg.lower() or "disconnect" in msg.lower()) else "internal"
            raise CaptureFailure("failed", kind, msg[:500]) from e
        if i == 0:
            if response is None:
                raise CaptureFailure("failed", "internal", "navigation produced no response")
            main_status = response.status
            if not 200 <= main_status < 300:
                raise CaptureFailure("http_error", "http", f"HTTP {main_status}", httpStatusCode=main_status,
                                     httpStatusText=reason_phrase(main_status, response.status_text))
        settle = await _settle(run, recorder, limits, dpr)
        await _trace(run, page, f"settled ({settle['endedBy']}) at devicePixelRatio {dpr}")
        if req.get("dismissBanners"):
            try:
                dismissal = await dismiss(page, req["dismissBanners"], dpr)
            except DismissFailed as e:
                raise CaptureFailure("timeout" if e.timeout else "failed", "timeout" if e.timeout else "internal",
                                     str(e), timeoutMs=5000 if e.timeout else None) from e
            await _trace(run, page, "banner removal done")
        if behaviors:
            if delay:
                await asyncio.sleep(delay)
            ran_behaviors = True
            await _trace(run, page, f"running {len(behaviors)} behavior(s)")
            behavior_records += await _run_behaviors(run, page, cdp, behaviors,
                                                     int(min(s.behaviors_ms, run.remaining_s() * 1000)))
            quiet = {**limits, "minMs": 0}
            await _settle(run, recorder, quiet, dpr)
    doc_url = page.url
    withheld = _document_withheld(run, recorder, doc_url)
    document: dict[str, Any] = {"url": doc_url}
    if withheld:
        document["withheld"] = withheld
    title = None
    run.step = "write-formats"
    fmts = run.formats
    if not withheld:
        title, links = await asyncio.wait_for(page.evaluate(TITLE_AND_LINKS_JS, fmts["links"]),
                                              run.op_timeout(s.operation_ms))
        links_at = datetime.now(timezone.utc)
        full = bool(req.get("fullPage"))
        if fmts["png"]:
            png = await page.screenshot(full_page=full, timeout=run.op_timeout(s.operation_ms) * 1000)
            _upload_soon(ctx, run, "png", png)
        if fmts["webp"]:
            shot = await asyncio.wait_for(cdp.send("Page.captureScreenshot", {
                "format": "webp", "captureBeyondViewport": full}), run.op_timeout(s.operation_ms))
            _upload_soon(ctx, run, "webp", base64.b64decode(shot["data"]))
        if fmts["html"]:
            html = await asyncio.wait_for(page.content(), run.op_timeout(s.operation_ms))
            _upload_soon(ctx, run, "html", html.encode("utf-8"))
        if fmts["links"]:
            doc: dict[str, Any] = {"taskId": run.task_id, "url": run.url, "finalUrl": doc_url, "labels": run.labels}
            if req.get("correlationId") is not None:
                doc["correlationId"] = req["correlationId"]
            doc["capturedAt"] = _iso(links_at)
            doc["links"] = links
            run.links = links
            _upload_soon(ctx, run, "links", (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))
        if fmts["mhtml"]:
            snap = await asyncio.wait_for(cdp.send("Page.captureSnapshot", {"format": "mhtml"}),
                                          run.op_timeout(s.operation_ms))
            _upload_soon(ctx, run, "mhtml", snap["data"].encode("utf-8"))
    result: dict[str, Any] = {"status": "success", "httpStatusCode": main_status}
    if fmts["wacz"]:
        run.step = "package-wacz"
        await recorder.stop(timeout_s=min(10.0, run.remaining_s()))
        wacz_bytes = await anyio.to_thread.run_sync(
            _package, run, recorder, title, document, settle, dprs, viewport, behaviors if ran_behaviors else None,
            behavior_records, ctx.settings, limits_of(run, recorder), dismissal)
        await _uploads_done(run)  # the WACZ is written only after every page format was
        run.step = "upload-wacz"
        await _upload(ctx, run, "wacz", wacz_bytes)
        result["waczStats"] = recorder.stats()
        result["completeness"] = recorder.completeness()
    else:
        await _uploads_done(run)
    # Report form of settle: signals not reached are absent (the archive writes null).
    result.update(settle=settle, document=document, windowsNotOpened=windows["refused"])
    return result


def limits_of(run: Run, recorder: Recorder) -> dict[str, int]:
    return {"maxResponseBytes": recorder.max_response_bytes, "maxTaskBytes": recorder.max_task_bytes}


def _archive_settle(settle: dict[str, Any]) -> dict[str, Any]:
    out = json.loads(json.dumps(settle))
    for sig in ("network", "cpu", "dom"):
        out.setdefault(sig, {}).setdefault("quietAtMs", None)
    return out


def _document_withheld(run: Run, recorder: Recorder, doc_url: str) -> str | None:
    m = run.policies.match_url(doc_url)
    if m is not None:
        return {"no-body": "url-policy", "no-archive": "no-archive", "deny": "deny"}[m.action]
    for ex in reversed(recorder.exchanges):
        if ex.url == doc_url and ex.resource_type == "document" and ex.withheld == "content-type":
            return "content-type"
    return None


def _package(run: Run, recorder: Recorder, title: str | None, document: dict, settle: dict, dprs: list[int],
             viewport: dict, behaviors: list[dict] | None, behavior_records: list[dict], s: ServerSettings,
             limits: dict[str, int], dismissal: dict[str, Any] | None) -> bytes:
    req = run.req
    preload = req.get("preload") or []
    extra: list[Member] = []
    if behaviors is not None:
        extra.append(Member("behaviors/runtime.js", RUNTIME_JS.encode("utf-8")))
        extra.append(Member("behaviors/custom.jsonl", "".join(json.dumps(
            {"profile": "browserhive:behaviors/1", "id": b["id"], "source": b["source"]}, ensure_ascii=False) + "\n"
            for b in behaviors).encode("utf-8")))
        extra.append(Member("behaviors/reports.jsonl", "".join(json.dumps(
            {"profile": "browserhive:behavior-reports/1", **r}, ensure_ascii=False, default=str) + "\n"
            for r in behavior_records).encode("utf-8")))
    if preload:
        extra.append(Member("preload/scripts.jsonl", "".join(json.dumps(
            {"profile": "browserhive:preload/1", "id": p["id"], "source": p["source"]}, ensure_ascii=False) + "\n"
            for p in preload).encode("utf-8")))
    settings: dict[str, Any] = {
        "signature": "none", "viewport": viewport, "devicePixelRatios": dprs,
        "session": req.get("session") or "isolated",
        "behaviors": [{"id": b["id"], "origin": "custom"} for b in (req.get("behaviors") or [])],
        "preload": [{"id": p["id"]} for p in preload],
        "limits": limits,
        "urlPolicies": run.policies.url_policies, "contentTypePolicies": run.policies.content_type_policies,
    }
    if (req.get("acceptLanguage") or "").strip():
        settings["acceptLanguage"] = req["acceptLanguage"]
    start_iso = _iso(run.started)
    package = {
        "name": f"browserhive-{run.task_id}", "software": SOFTWARE, "created": _iso(datetime.now(timezone.utc)),
        "mainPageURL": run.url, "mainPageDate": start_iso, "title": title or run.url,
        "browserhive:capture": {
            "conformsTo": CONFORMS_TO, "build": BUILD, "browser": {"product": "Chromium (Debian /usr/bin/chromium)"},
            "settings": settings, "completeness": recorder.completeness(), "settle": _archive_settle(settle),
            "document": document,
        },
    }
    if dismissal is not None:
        package["browserhive:capture"]["dismissal"] = dismissal
    with tempfile.TemporaryDirectory(prefix="capture-") as tmp:
        warc = Path(tmp) / "data.warc.gz"
        write_warc(warc, task_id=run.task_id, url=run.url, software=SOFTWARE, exchanges=recorder.exchanges,
                   denied=recorder.denied, created=run.started)
        cdxj = cdxj_index(warc)
        out = Path(tmp) / "out.wacz"
        build_wacz(out, warc=warc, cdxj=cdxj, pages=pages_jsonl(run.task_id, run.url, start_iso, title),
                   extra=extra, datapackage=package)
        return out.read_bytes()
