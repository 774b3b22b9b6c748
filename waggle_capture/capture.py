"""One capture, from address check to the manifest (contracts.md §A.3–§A.9, §B).

:func:`run_capture` takes a validated request and returns the 200 body
``{taskId, report, manifest: {location} | {error}}``. Every step has a deadline: the whole task
is bounded by ``task_total_ms`` (``timeout`` with ``step``), a page load by ``page_load_ms``,
every other browser operation by ``operation_ms``, behaviors by ``behaviors_ms`` and the
manifest write by ``manifest_ms`` on top — so a capture always ends.

Order of work (§B.1), one module per step: check address (here) → start recording
(:mod:`.session`: fresh context, preload scripts, deny gate) → load pages (:mod:`.load`: one
load per device pixel ratio; :mod:`.settle` wait; :mod:`.behaviors` with ``__bh``) → write formats
png → webp → html → links → mhtml (:mod:`.formats`) → package and upload the WACZ
(:mod:`.package`) → manifest (:mod:`.uploads`).

What keeps a capture short (issue 8 item 5, issue 11 item 3): page-format uploads run
concurrently with the next format and with WACZ packaging (the WACZ is uploaded only after all of
them were written); the next context is prepared as soon as this capture opened its own
(:mod:`.spare`); the page's network is sealed right after the formats (with ``sealBeforeFormats``,
extension 10: right after the settle wait and behaviors, the formats then taken from the sealed
page, :mod:`.afterseal`), and from then on the next
capture may start while this one packages (app.py ``CaptureGate``, issue 11); the browser context is
closed after the response, in the background — each context has its own sealed proxy, so the
next capture does not wait for that teardown (:meth:`Ctx.wait_idle`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from datetime import datetime, timezone
from typing import Any, Callable
from urllib.parse import urlsplit

import anyio.to_thread
from playwright.async_api import Browser
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import TimeoutError as PlaywrightTimeout

from waggle_capture import names
from waggle_capture.afterseal import AfterSeal
from waggle_capture.behaviors import RUNTIME_JS
from waggle_capture.browser import BrowserUnavailable
from waggle_capture.domquiet import MAX_MS as DOM_QUIET_MAX_MS, wait_dom_quiet
from waggle_capture.formats import write_formats
from waggle_capture.holds import Hold, HeldDuplicate, track_landing, wait_turn
from waggle_capture.load import load_pages, refused_navigation
from waggle_capture.navrules import NavigationRules
from waggle_capture.package import write_file_capture, write_wacz
from waggle_capture.policies import Policies
from waggle_capture.proxy import checked_addresses
from waggle_capture.recorder import Recorder
from waggle_capture.robotsmeta import NOARCHIVE_MESSAGE, header_wishes, wishes
from waggle_capture.seals import Seal
from waggle_capture.session import (Session, open_session, prepare_soon, refuse_popups, seal, seal_network,
                                      teardown_soon)
from waggle_capture.settings import ServerSettings
from waggle_capture.sink import HttpSink, S3Sink
from waggle_capture.state import BudgetExhausted, CaptureFailure, Ctx, Run, iso
from waggle_capture.uploads import uploads_done, write_manifest
from ledger.hostguard import HostRefused

log = logging.getLogger("waggle_capture")

__all__ = ["Ctx", "Run", "run_capture", "CaptureFailure", "BudgetExhausted", "RUNTIME_JS"]


async def run_capture(ctx: Ctx, req: dict[str, Any], *, accepted: float | None = None,
                      seal: Seal | None = None, on_sealed: Callable[[], None] | None = None,
                      hold: Hold | None = None, on_run: Callable[[Run], None] | None = None) -> dict[str, Any]:
    """Run one capture; returns the ``CaptureResponse`` body (always; raises only
    :class:`.holds.HeldDuplicate`, for a held capture ended before it sent anything).

    ``accepted``: monotonic seconds when the request was received (budget and ``startAfterMs``
    run from it; default now). ``seal``: the seal of the request's ``Waggle-Capture-Key``
    (extension ``sealWait``), signalled when the network is sealed and again when the capture
    ends; ``on_sealed`` is called once at the first of the two (the browser is free then).
    ``hold`` (extension ``holdAfter``): nothing reaches a site before the previous capture's
    seal + gap (:mod:`.holds`). ``on_run`` is given the capture's ``Run`` as soon as it exists
    (app.py's disconnect watcher, :mod:`.abandon`).
    Leaves background work in ``ctx`` (context teardown, next spare); the next call waits only
    for what it must (:meth:`Ctx.wait_idle`), and that wait counts against its task budget, so a
    hung teardown cannot push the answer past the caller's deadline. The answer carries
    ``sinceLastRequestMs`` (docs/capture-server.md) when the page made a request."""
    accepted = time.monotonic() if accepted is None else accepted
    await ctx.wait_idle()
    run = _new_run(ctx, req, accepted)
    if seal is not None:
        seal.run, run.seal_signal = run, seal.event
    run.on_sealed, run.hold = on_sealed, hold
    if on_run is not None:
        on_run(run)
    try:
        return await _capture_and_answer(ctx, run, req)
    finally:
        run.signal_sealed()  # ended in any way: a seal wait answers (sinceLastRequestMs may be null)


async def _capture_and_answer(ctx: Ctx, run: Run, req: dict[str, Any]) -> dict[str, Any]:
    run.mark("wait-idle")
    report: dict[str, Any] = {"taskId": run.task_id}
    if req.get("correlationId") is not None:
        report["correlationId"] = req["correlationId"]
    report.update({"url": run.url, "labels": run.labels})
    processing_ms: int | None = None
    try:
        body = await asyncio.wait_for(_capture(ctx, run), timeout=max(0.01, run.remaining_s()))
        report.update(body)
        report["artifacts"] = dict(run.artifacts)
    except HeldDuplicate:
        raise  # nothing was sent: app.py answers 409, no manifest
    except Exception as e:  # noqa: BLE001 — a capture must always end with a report
        fields, processing_ms = _failure(ctx.settings, run, e)
        report.update(fields)
    if report["status"] != "success":
        report["artifacts"] = {}
    report["timestamp"] = iso(datetime.now(timezone.utc))
    report["captureProcessingTimeMs"] = (
        processing_ms if processing_ms is not None else int((time.monotonic() - run.t0) * 1000))
    report = _ordered(report)
    manifest = await write_manifest(ctx, run, report)
    run.mark("manifest")
    ctx.last_phases_ms = run.phases_ms()
    answer: dict[str, Any] = {"taskId": run.task_id, "report": report, "manifest": manifest}
    if report["status"] == "success" and run.links is not None and "links" in report["artifacts"]:
        answer["links"] = run.links  # waggle extension: the .links.json items inline (docs/internals.md)
    since = run.since_last_request_ms()  # last: the answer is written right after this
    if since is not None:
        answer["sinceLastRequestMs"] = since
    if (retry_after := run.retry_after_ms()) is not None:  # extension 18
        answer["retryAfterMs"] = retry_after
    if run.robots is not None:  # extension robotsMeta: what the page asked of robots
        answer["robots"] = run.robots
    if (turn_wait := run.turn_wait_ms()) is not None:  # the wait behind the previous page (extensions 9, 12)
        answer["turnWaitMs"] = turn_wait
    if run.document_ms is not None:  # extension "serverpolite": a slow host's longer gap
        answer["documentMs"] = run.document_ms
    log.info("timeline %s", json.dumps(run.timeline()))  # per-phase times (tests/bench/politeness.py)
    return answer


def _new_run(ctx: Ctx, req: dict[str, Any], accepted: float) -> Run:
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
               t0=accepted, deadline=accepted + budget_ms / 1000, formats=req["captureFormats"], signer=s.signer)
    run.nav_rules = NavigationRules.of(req)  # extension navigationRules (validated: patterns compile)
    return run


def _failure(s: ServerSettings, run: Run, e: Exception) -> tuple[dict[str, Any], int | None]:
    """The report fields of a capture that ended with ``e``, and ``captureProcessingTimeMs``
    when it is fixed (0: refused before anything started), else None."""
    budget_ms = s.faults.task_total_ms or s.task_total_ms
    if isinstance(e, (asyncio.TimeoutError, BudgetExhausted)):
        if isinstance(e, BudgetExhausted) or run.remaining_s() <= 0.1:  # the whole-task budget
            return {"status": "timeout", "errorDetails": {
                "type": "timeout", "message": f"the task budget of {budget_ms} ms ran out during {run.step}",
                "timeoutMs": budget_ms, "step": run.step}}, None
        return {"status": "timeout", "errorDetails": {  # one operation's own deadline
            "type": "timeout", "message": f"a browser operation exceeded {s.operation_ms} ms during {run.step}",
            "timeoutMs": s.operation_ms}}, None
    if isinstance(e, PlaywrightTimeout):
        return {"status": "timeout", "errorDetails": {
            "type": "timeout", "message": str(e).splitlines()[0][:500], "timeoutMs": s.operation_ms}}, None
    if isinstance(e, PlaywrightError):
        msg = str(e).splitlines()[0][:500]
        closed = any(w in msg.lower() for w in ("closed", "disconnect", "crash"))
        return {"status": "failed", "errorDetails": {"type": "connection" if closed else "internal",
                                                     "message": msg}}, None
    if isinstance(e, CaptureFailure):
        fields: dict[str, Any] = {"status": e.status, "errorDetails": e.details}
        if e.status == "http_error":
            fields["httpStatusCode"] = e.details["httpStatusCode"]
        if run.final_url:
            fields["finalUrl"] = run.final_url
        fixed = 0 if e.details["type"] == "connection" and run.step == "check-address" else None
        return fields, fixed
    log.error("capture %s failed", run.task_id, exc_info=e)
    return {"status": "failed", "errorDetails": {"type": "internal",
                                                 "message": f"{type(e).__name__}: {e}"[:500]}}, None


_ORDER = ["taskId", "correlationId", "url", "finalUrl", "labels", "status", "httpStatusCode", "timestamp",
          "captureProcessingTimeMs", "artifacts", "waczStats", "completeness", "signature", "errorDetails", "settle",
          "document", "windowsNotOpened"]


def _ordered(report: dict[str, Any]) -> dict[str, Any]:
    return {k: report[k] for k in _ORDER if k in report} | {k: v for k, v in report.items() if k not in _ORDER}


async def _capture(ctx: Ctx, run: Run) -> dict[str, Any]:
    await _forced_faults(ctx)
    checked = await _check_address(ctx, run)
    run.mark("check-address")
    first = run.policies.match_url(run.url)
    if first is not None and first.action == "deny":
        return {"status": "success", "document": {"withheld": "deny"}, "windowsNotOpened": 0}
    browser = await _browser(ctx, may_recycle=run.hold is None or run.hold.sealed())  # never under a loading capture
    run.mark("browser")
    return await _record(ctx, run, browser, checked)


async def _forced_faults(ctx: Ctx) -> None:
    faults = ctx.settings.faults
    if faults.slow_ms:
        await asyncio.sleep(faults.slow_ms / 1000)
    if faults.error_type:
        if faults.error_type == "http":
            raise CaptureFailure("http_error", "http", "HTTP 503 (forced by fault knob)",
                                 httpStatusCode=503, httpStatusText="Service Unavailable")
        status = "timeout" if faults.error_type == "timeout" else "failed"
        raise CaptureFailure(status, faults.error_type, f"forced {faults.error_type} failure (fault knob)")


async def _check_address(ctx: Ctx, run: Run) -> dict[tuple[str, int], list[str]]:
    """The target must pass the private-host guard before anything starts; returns its checked
    addresses ``{(host, port): [address]}`` for the proxy."""
    parts = urlsplit(run.url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise CaptureFailure("failed", "internal", "url is not allowed")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        addresses = await anyio.to_thread.run_sync(checked_addresses, parts.hostname, port,
                                                   ctx.settings.allow_private)
    except HostRefused as e:
        log.info("refused %s: %s", run.url, e.reason)
        raise CaptureFailure("failed", "internal", "url is not allowed") from e
    except (OSError, ValueError) as e:
        raise CaptureFailure("failed", "internal", f"net::ERR_NAME_NOT_RESOLVED ({e})") from e
    return {(parts.hostname, port): addresses}


async def _browser(ctx: Ctx, may_recycle: bool = True) -> Browser:
    s, faults = ctx.settings, ctx.settings.faults
    if faults.crash_browser:
        faults.crash_browser = False
        await ctx.browser.kill_for_test()
        await asyncio.sleep(0.5)
    ctx.browser.max_rss_mb = faults.max_rss_mb or s.max_rss_mb
    ctx.browser.recycle_every = faults.recycle_every or s.recycle_every
    try:
        return await ctx.browser.ensure(may_recycle)
    except BrowserUnavailable as e:
        raise CaptureFailure("failed", "connection", str(e)) from e


async def _record(ctx: Ctx, run: Run, browser: Browser, checked: dict[tuple[str, int], list[str]]) -> dict[str, Any]:
    """Everything from "start recording" to the WACZ upload; the page's network is sealed
    before this returns, its teardown left to the background (:func:`session.teardown_soon`)."""
    s, req = ctx.settings, run.req
    run.step = "start-recording"
    dprs = req.get("devicePixelRatios") or s.device_pixel_ratios
    viewport = req.get("viewport") or s.viewport
    max_resp = min(int(req.get("maxResponseBytes") or s.max_response_bytes), s.max_response_bytes)
    recorder = Recorder(run.policies, max_resp, s.max_task_bytes, max_pending=s.max_pending_requests)
    sess = Session(shared=req.get("session") == "shared")
    try:
        await open_session(ctx, run, browser, recorder, sess, viewport, dprs[-1])
        assert sess.proxy is not None
        sess.proxy.begin_capture(
            deny=lambda u: (m := run.policies.match_url(u)) is not None and m.action == "deny",
            on_denied=lambda u, method: recorder.record_denied(u, method, run.policies.match_url(u).pattern),
            checked=checked,  # the target was just checked: no second lookup
        )
        run.proxy = sess.proxy
        if run.on_egress is not None:  # a client already gone stops it here (abandon.py)
            run.on_egress()
        run.mark("open-session")
        # The next capture's context, ready by this one's seal (issue 11), prepared while this one
        # waits: its turn (holdAfter) or the settle wait after the load event — not during the
        # page's load, whose renderer it slowed (a new renderer process: 0.6 s of CPU; docs/internals.md).
        prepare = None if sess.shared else (lambda: prepare_soon(ctx))
        assert sess.page is not None
        windows = refuse_popups(sess.page)
        track_landing(run, sess.page)  # seal answer finalUrl; a held capture's redirect check
        if run.hold is not None:
            if prepare is not None:
                prepare()
            await wait_turn(run)
        try:
            loaded = await load_pages(ctx, run, sess.page, sess.cdp, recorder, dprs, viewport, on_loaded=prepare)
        except CaptureFailure as e:  # a held capture's back-off reads it before the seal below
            run.doc_status = e.details.get("httpStatusCode")
            raise
        refused_navigation(run)  # a script's navigation the rules refused (extension navigationRules)
        if loaded.file is not None:
            run.robots = header_wishes(loaded.file.exchange.resp_headers)  # extension robotsMeta
            if run.robots is not None and run.robots["noarchive"] and req.get("honourNoarchive"):
                raise CaptureFailure("failed", "policy", NOARCHIVE_MESSAGE)  # read, but nothing written
            return {**await write_file_capture(ctx, run, recorder, loaded, dprs, viewport),
                    "windowsNotOpened": windows["refused"]}
        if not loaded.incomplete:  # links added by script after the load (issue 24 item 7): before the seal
            run.step = "dom-quiet"
            loaded.settle["dom"] = await wait_dom_quiet(
                sess.page, max(0.01, min(DOM_QUIET_MAX_MS / 1000 + 2, run.remaining_s() - 1)))
            run.mark("dom-quiet")
        run.robots = await wishes(sess.page, recorder, run.op_timeout(s.operation_ms))  # extension robotsMeta
        if run.robots is not None and run.robots["noarchive"] and req.get("honourNoarchive"):
            # nothing was written yet (no format, no WACZ): the failure leaves no archive bytes
            raise CaptureFailure("failed", "policy", NOARCHIVE_MESSAGE)
        refused_navigation(run)  # one the settle or dom-quiet wait saw: still nothing written
        if req.get("sealBeforeFormats") or loaded.incomplete:  # ext. 10, 14: the formats from the sealed page
            run.after_seal = AfterSeal(sess.context)
            await seal_network(ctx, run, recorder, timeout_s=min(10.0, run.remaining_s()))
            run.mark("seal")
        title, document = await write_formats(ctx, run, sess.page, sess.cdp, recorder)
        if run.after_seal is not None:
            run.after_seal.stop()
        result: dict[str, Any] = {"status": "success", "httpStatusCode": loaded.main_status,
                                  "finalUrl": document["url"]}
        if run.formats["wacz"]:
            result.update(await write_wacz(ctx, run, recorder, loaded, title, document, dprs, viewport))
        else:
            if not run.network_sealed:
                await seal_network(ctx, run, recorder, timeout_s=min(10.0, run.remaining_s()))
                run.mark("seal")
            await uploads_done(run)
            run.mark("uploads")
        # Report form of settle: signals not reached are absent (the archive writes null).
        result.update(settle=loaded.settle, document=document, windowsNotOpened=windows["refused"])
        if run.screenshot is not None:  # extension: docs/capture-server.md
            result["screenshot"] = run.screenshot
        if loaded.incomplete:  # extension 14 captureAtDeadline: loading ended by the deadline
            result["incomplete"] = loaded.incomplete
        if run.after_seal is not None:  # extension 10: what the sealed page still asked for
            result["afterSeal"] = run.after_seal.report()
        return result
    finally:
        if run.after_seal is not None:
            run.after_seal.stop()
        await seal(ctx, run, recorder)
        teardown_soon(ctx, sess)
