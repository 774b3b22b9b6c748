"""Loading the page: one navigation per device pixel ratio, each followed by the settle wait,
banner removal and behaviors (contracts.md §B.1 step "load pages")."""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page, Response
from playwright.async_api import TimeoutError as PlaywrightTimeout

from waggle_capture import challenge, documenttime, proxystatus, retryafter
from waggle_capture.behaviors import run_behaviors
from waggle_capture.dismiss import DismissFailed, dismiss
from waggle_capture.recorder import Recorder
from waggle_capture.redirectloop import RedirectLoopGuard, credentials_refused, has_userinfo, without_userinfo
from waggle_capture.settle import settle
from waggle_capture.state import BudgetExhausted, CaptureFailure, Ctx, Run
from waggle_capture.warc import reason_phrase


@dataclass
class Loaded:
    """What loading left for the formats and the WACZ."""

    main_status: int | None = None
    settle: dict[str, Any] = field(default_factory=dict)  # of the last device pixel ratio
    limits: dict[str, int] = field(default_factory=dict)  # the settle limits used (ms)
    behavior_records: list[dict] = field(default_factory=list)
    ran_behaviors: bool = False
    dismissal: dict[str, Any] | None = None
    file: Any = None  # the .files.TakenFile when the main document is a file (nothing else ran)
    # captureAtDeadline (extension 14): the report's ``incomplete`` when the page-load deadline
    # ended loading (the formats and the WACZ then come from what had loaded), else None.
    incomplete: dict[str, Any] | None = None


async def trace(run: Run, page: Page, message: str) -> None:
    """``trace: true`` → a ``[bh]`` line in the page's own console (artifacts unchanged)."""
    if run.req.get("trace"):
        try:
            await asyncio.wait_for(page.evaluate("m => console.log(m)", f"[bh] {message}"), 2)
        except Exception:  # noqa: BLE001 — tracing never fails a capture
            pass


async def load_pages(ctx: Ctx, run: Run, page: Page, cdp, recorder: Recorder, dprs: list[int],
                     viewport: dict, on_loaded: Callable[[], None] | None = None) -> Loaded:
    """Navigate once per device pixel ratio in ``dprs`` (the first load's status must be 2xx),
    settle, dismiss banners, run behaviors. ``on_loaded`` is called once, when the first
    navigation has ended (its load event, a deadline or a file; not when it failed): background
    work starts then, not during the page's load. Raises :class:`CaptureFailure` / :class:`BudgetExhausted`."""
    s = ctx.settings
    req = run.req
    delay = (req.get("operationDelayMs") or 0) / 1000
    out = Loaded(limits={**s.settle, **(req.get("loadWait") or {})})
    behaviors = req.get("behaviors") or []
    await start_after(run)
    run.step = "load-pages"
    for i, dpr in enumerate(dprs):
        if i > 0:
            await cdp.send("Emulation.setDeviceMetricsOverride", {
                "width": viewport["width"], "height": viewport["height"], "deviceScaleFactor": dpr, "mobile": False})
        if delay:
            await asyncio.sleep(delay)
        response, late = await _guarded_navigate(ctx, run, page, cdp, recorder)
        run.mark("load")
        if i == 0 and on_loaded is not None:
            on_loaded()
        if i == 0 and run.files is not None and run.files.main is not None:
            out.file = run.files.main  # a file, not a page: no settle, no behaviors, no other pass
            out.main_status = out.file.exchange.status
            out.settle = file_settle(out.limits, dpr)
            return out
        if i == 0:
            if response is not None:  # the site's time for the document: a slow host's gap (decision 242)
                run.document_ms = documenttime.of(response, run)
            out.main_status = await _main_status(run, page, response)
            await refuse_huge_document(ctx, run, recorder, response)
        if late is not None:  # captureAtDeadline: stop here, take what is there (no settle, no behaviors)
            out.incomplete = await stop_at_deadline(ctx, run, cdp, late)
            out.settle = skipped_settle(out.limits, dpr, "deadline", load={})
            await trace(run, page, f"page-load deadline at devicePixelRatio {dpr}: captured as it is")
            return out
        out.settle = await settle(run, recorder, out.limits, dpr, page)
        run.mark("settle")
        await trace(run, page, f"settled ({out.settle['endedBy']}) at devicePixelRatio {dpr}")
        if req.get("dismissBanners"):
            out.dismissal = await _dismiss(run, page, dpr)
        if behaviors:
            if delay:
                await asyncio.sleep(delay)
            out.ran_behaviors = True
            await trace(run, page, f"running {len(behaviors)} behavior(s)")
            out.behavior_records += await run_behaviors(run, page, cdp, behaviors,
                                                        int(min(s.behaviors_ms, run.remaining_s() * 1000)))
            run.mark("behaviors")
            await settle(run, recorder, {**out.limits, "minMs": 0}, dpr)
        run.mark("dismiss-behaviors")
    return out


# The navigation starts this long before startAfterMs ends; the context's proxy holds every
# connection to a site until it has (GuardedProxy.hold_until), so the first request leaves on
# time instead of Chromium's navigation latency after it (27 ms quiet, 60–160 ms loaded).
NAVIGATION_LEAD_S = 0.15


async def start_after(run: Run) -> None:
    """Extension ``startAfterMs`` (docs/capture-server.md extension 9): the context, page and
    scripts are ready; nothing reaches a site until ``startAfterMs`` ms after the request was
    received (``run.t0``, monotonic), never earlier: the proxy holds connections until then and
    the first navigation starts :data:`NAVIGATION_LEAD_S` before. The wait counts against the task budget;
    one that would leave < 1 s of it ends the capture as a ``timeout`` at step ``start-after``."""
    run.step = "start-after"
    at = run.t0 + (run.req.get("startAfterMs") or 0) / 1000
    wait = at - time.monotonic()
    if wait > 0:
        if wait > run.remaining_s() - 1.0:
            raise BudgetExhausted()
        if run.proxy is not None:
            run.proxy.hold_until(at)
            wait -= NAVIGATION_LEAD_S
        if wait > 0:
            await asyncio.sleep(wait)
    run.mark("start-after")


async def _guarded_navigate(ctx: Ctx, run: Run, page: Page, cdp, recorder: Recorder):
    """:func:`_navigate`, its same-host redirect chain ended after a few hops and a redirect to a
    URL with credentials refused (:mod:`.redirectloop`)."""
    stopping: list[asyncio.Future] = []  # the stop's task, referenced until the navigation ends
    guard = RedirectLoopGuard(lambda: stopping.append(asyncio.ensure_future(cdp.send("Page.stopLoading"))))
    page.on("request", guard.on_request)
    try:
        response, late = await _navigate(ctx, run, page, recorder)
    except CaptureFailure:
        if guard.ended_at is not None:  # Chromium's own words for a loop (the navigation was stopped)
            loop = f"Page.goto: net::ERR_TOO_MANY_REDIRECTS at {run.url}"
            raise CaptureFailure("failed", "internal", loop[:500]) from None
        if guard.credentials is not None:
            raise CaptureFailure("failed", "internal", credentials_refused(guard.credentials)[:500]) from None
        raise
    finally:
        page.remove_listener("request", guard.on_request)
    landed = response.url if response is not None else None
    if guard.credentials is not None or (landed and has_userinfo(landed)):  # committed before the stop
        refused = credentials_refused(guard.credentials or without_userinfo(landed))
        raise CaptureFailure("failed", "internal", refused[:500])
    return response, late


async def _navigate(ctx: Ctx, run: Run, page: Page, recorder: Recorder) -> tuple[Response | None, list[str] | None]:
    """Navigate and wait for the load event within ``page_load_ms``: ``(response, None)``.

    The page-load budget measures the page, not a wait before it: for a held capture
    (``holdAfter``) it starts when the proxy lets its first connection out (:attr:`.holds.Hold.released`),
    not when the navigation was issued; the whole-task budget still bounds everything.

    With ``captureAtDeadline`` (extension 14) a committed page whose load event does not come
    in time is not a failure: ``(response, pending)`` with the URLs still in flight at the
    deadline (sorted). A page that did not even commit (no main document) is a ``timeout`` as
    without the extension."""
    s = ctx.settings
    at_deadline = bool(run.req.get("captureAtDeadline"))
    deadline = asyncio.ensure_future(_page_load_deadline(run, s.page_load_ms / 1000))
    try:
        response = await _before(deadline, page.goto(
            run.url, wait_until="commit" if at_deadline else "load", timeout=_budget_ms(run)))
        if not at_deadline:
            return response, None
        try:
            await _before(deadline, page.wait_for_load_state("load", timeout=_budget_ms(run)))
            return response, None
        except (PlaywrightTimeout, _PageLoadDeadline):
            if run.remaining_s() <= 0.5:
                raise BudgetExhausted() from None
            return response, pending_urls(recorder)
    except (PlaywrightTimeout, _PageLoadDeadline) as e:
        if run.remaining_s() <= 0.5:
            raise BudgetExhausted() from e
        raise CaptureFailure("timeout", "timeout", f"page load exceeded {s.page_load_ms} ms",
                             timeoutMs=s.page_load_ms) from e
    except PlaywrightError as e:
        refused_navigation(run)  # a hop the navigation rules refused: that, not ERR_BLOCKED_BY_CLIENT
        if run.files is not None and run.files.main is not None:
            return None, None  # aborted on purpose: .files read the main document as a file
        if run.files is not None and run.files.huge_document is not None:  # aborted on purpose: too large
            url, size = run.files.huge_document
            raise huge_document(url, size, run.files.limit) from None
        raise navigation_failure(run, e) from e
    finally:
        deadline.cancel()


class _PageLoadDeadline(Exception):
    """The page-load budget ran out (measured from the release, :func:`_page_load_deadline`)."""


def _budget_ms(run: Run) -> float:
    """Playwright's own timeout of a page-load step: the whole-task budget left (the page-load
    budget is enforced by :func:`_page_load_deadline`, which may start later)."""
    return max(0.05, run.remaining_s()) * 1000


async def _page_load_deadline(run: Run, budget_s: float) -> None:
    """Return once ``budget_s`` passed since the page could first reach its site: now, or for a
    held capture behind a proxy the moment the proxy released it."""
    hold = run.hold
    if hold is not None and run.proxy is not None:
        await hold.released.wait()
    await asyncio.sleep(budget_s)


async def _before(deadline: asyncio.Future, step: Any) -> Any:
    """Await ``step`` unless ``deadline`` ends first (then ``step`` is cancelled and
    :class:`_PageLoadDeadline` raised)."""
    task = asyncio.ensure_future(step)
    try:
        await asyncio.wait({task, deadline}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:  # the whole-task budget: the step goes with it
        task.cancel()
        raise
    if task.done():
        return task.result()
    task.cancel()
    task.add_done_callback(lambda t: t.cancelled() or t.exception())  # retrieved: no "never retrieved" noise
    raise _PageLoadDeadline()


# URLs still pending at the deadline listed in the answer (the count covers all of them).
PENDING_CAP = 20


def pending_urls(recorder: Recorder) -> list[str]:
    """The http(s) URLs the page had in flight at this moment, sorted, without repeats."""
    return sorted({r.url for r in recorder.inflight})


async def stop_at_deadline(ctx: Ctx, run: Run, cdp, pending: list[str]) -> dict[str, Any]:
    """Stop the page's loading (CDP ``Page.stopLoading``, bounded) and describe why the capture
    is incomplete: the report's and the WACZ's ``incomplete`` object (docs/capture-server.md
    extension 14). The network is sealed next (capture.py), before the formats."""
    with contextlib.suppress(Exception):  # a page that cannot be stopped is sealed all the same
        await asyncio.wait_for(cdp.send("Page.stopLoading"), run.op_timeout(2000))
    return {"reason": "page-load-deadline", "deadlineMs": ctx.settings.page_load_ms,
            "pendingUrls": pending[:PENDING_CAP], "pendingCount": len(pending)}


def refused_navigation(run: Run) -> None:
    """Raise the capture's ``permanent`` failure when a main-frame navigation (redirect hop,
    script or meta refresh) was refused by the request's navigation rules (.navrules); it
    was never requested, and nothing is written after this (callers run it before any format)."""
    if run.nav_rules is not None and run.nav_rules.refused is not None:
        raise CaptureFailure("failed", "internal", run.nav_rules.message())


def navigation_failure(run: Run, e: PlaywrightError) -> CaptureFailure:
    """A failed navigation: Playwright's first line, with Chromium's ``net::ERR_*`` code,
    verbatim in ``errorDetails.message`` (crawl_host classifies failures from it). A navigation
    that became a download the file reader did not take (it takes every 2xx main-frame file, so
    this is a fallback) also names the URL and says nothing was archived."""
    msg = str(e).splitlines()[0]
    low = msg.lower()
    kind = "connection" if ("closed" in low or "disconnect" in low) else "internal"
    if "download is starting" in low:
        msg = f"{msg}: refused download of {run.url}; nothing was archived"
    return CaptureFailure("failed", kind, msg[:500])


def file_settle(limits: dict[str, int], dpr: int) -> dict[str, Any]:
    """``settle`` of a file capture: no page was loaded, so no wait (``endedBy: "file"``)."""
    return skipped_settle(limits, dpr, "file", load={})


def skipped_settle(limits: dict[str, int], dpr: int, ended_by: str, load: dict) -> dict[str, Any]:
    """A ``settle`` object for a capture that did not wait (``waitedMs`` 0, ``endedBy`` as given)."""
    return {"strategy": "fully-loaded", "endedBy": ended_by, "waitedMs": 0, "devicePixelRatio": dpr,
            "limits": dict(limits), "load": load, "network": {}, "cpu": {}, "dom": {}}


async def _main_status(run: Run, page: Page, response: Response | None) -> int:
    if response is None:
        raise CaptureFailure("failed", "internal", "navigation produced no response")
    status = response.status
    if status == 502 and (error := proxystatus.net_error(list((await response.all_headers()).items()))):
        # The capture proxy could not reach the site: Chromium's own network error, not its 502.
        raise CaptureFailure("failed", "internal", f"{error} at {response.url}"[:500])
    if not 200 <= status < 300:
        if status in retryafter.STATUSES:  # a held capture waits for it (holdAfter); the answer says it
            run.retry_after_s = retryafter.delay_s(retryafter.header(await response.all_headers()))
        found = await challenge.checked(run, response, status)  # extension challengeSignature
        await _follow_script_navigation(run, page, response.url)
        raise challenge.with_challenge(CaptureFailure("http_error", "http", f"HTTP {status}", httpStatusCode=status,
                                                      httpStatusText=reason_phrase(status, response.status_text)), found)
    await challenge.refuse_challenge(run, response, status)  # a 2xx that a definitive header marks
    return status


def size_text(n: int) -> str:
    """``20 MB`` for whole MiB, else ``N bytes``."""
    return f"{n // 1048576} MB" if n % 1048576 == 0 else f"{n} bytes"


async def refuse_huge_document(ctx: Ctx, run: Run, recorder: Recorder, response: Response | None) -> None:
    """The main document over the per-response limit (``maxResponseBytes``, 20 MB by default)
    ends the capture ``failed`` / ``policy`` "document larger than the 20 MB limit (N bytes):
    nothing archived" — an archive without its page is no capture, and a retry gets the same
    page (docs/internals.md "Huge documents (round 22)"). The size is the declared
    ``Content-Length`` (then :mod:`.files` aborted its navigation already, unless its load
    raced the abort), else the body the recorder read (a subresource over the limit is kept
    as a metadata record, ``truncated: too-large``, as before)."""
    if response is None:
        return
    limit = recorder.max_response_bytes
    size = next((int(v) for k, v in (await response.all_headers()).items()
                 if k == "content-length" and v.strip().isdigit()), None)
    if size is None:
        await recorder.handled(response.url, run.op_timeout(ctx.settings.operation_ms))
        size = next((e.encoded_length for e in recorder.exchanges
                     if e.url == response.url and e.truncated == "too-large"), None)
    if size is not None and size > limit:
        raise huge_document(response.url, size, limit)


def huge_document(url: str, size: int, limit: int) -> CaptureFailure:
    """The ``policy`` failure of a page whose main document (``size`` bytes) is over ``limit``."""
    return CaptureFailure("failed", "policy", f"document larger than the {size_text(limit)} limit "
                                              f"({size} bytes) at {url}: nothing archived"[:500])


async def _follow_script_navigation(run: Run, page: Page, response_url: str) -> None:
    """A non-2xx page may already be leaving by script (``window.location = '/'`` from a 403
    page): let that navigation commit (bounded, ≤ 2 s) so ``finalUrl`` says where it ended."""
    if page.url != response_url:
        with contextlib.suppress(Exception):
            await page.wait_for_load_state("domcontentloaded", timeout=run.op_timeout(2000) * 1000)
    run.final_url = page.url


async def _dismiss(run: Run, page: Page, dpr: int) -> dict[str, Any] | None:
    try:
        dismissal = await dismiss(page, run.req["dismissBanners"], dpr)
    except DismissFailed as e:
        raise CaptureFailure("timeout" if e.timeout else "failed", "timeout" if e.timeout else "internal",
                             str(e), timeoutMs=5000 if e.timeout else None) from e
    await trace(run, page, "banner removal done")
    return dismissal
