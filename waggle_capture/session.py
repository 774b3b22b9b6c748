"""A capture's browser session: open it (spare, new or shared context; headers, preloads, deny
gate, recorder), seal it before the answer, tear it down after the answer.

Sealing (:func:`seal_network`, as soon as the page formats are taken, and :func:`seal` before
the answer) stops the recorder and closes the context's own proxy, so nothing reaches a site
after the capture ended, and notes when the page's last request ended (``sinceLastRequestMs``).
Closing the context and its proxy (:func:`teardown_soon`) runs after the answer, and preparing
the next capture's spare context (:func:`prepare_soon`) from when this capture opened its own,
both in the background (``Ctx.teardowns``, ``Ctx.preparing``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

import anyio.to_thread
from playwright.async_api import Browser, BrowserContext, Page
from playwright.async_api import Error as PlaywrightError

from waggle_capture import conditional, domquiet, scrollhooks
from waggle_capture.files import FileTaker
from waggle_capture.rawbodies import RawBodies
from waggle_capture.proxy import GuardedProxy
from waggle_capture.recorder import Recorder
from waggle_capture.spare import Opened, open_context
from waggle_capture.state import CaptureFailure, Ctx, Run
from waggle_capture.useragent import page_user_agent

log = logging.getLogger("waggle_capture")


@dataclass
class Session:
    """The browser side of one capture; fields stay None until opened."""

    shared: bool
    context: BrowserContext | None = None
    page: Page | None = None
    cdp: object | None = None
    proxy: GuardedProxy | None = None  # the context's own egress proxy
    gate: object | None = None  # the deny-gate route handler, when URL policies deny
    main_frame: str | None = None  # set when the file reader's domains are enabled already (a spare)


async def open_session(ctx: Ctx, run: Run, browser: Browser, recorder: Recorder, sess: Session,
                       viewport: dict, dpr: int) -> None:
    """Fill ``sess`` with a context for this capture and start recording; raises
    :class:`CaptureFailure` (``connection``) when the browser is not usable."""
    s = ctx.settings
    req = run.req
    try:
        await _open_page(ctx, run, browser, sess, viewport, dpr)
        context = sess.context
        assert context is not None
        if (req.get("acceptLanguage") or "").strip():
            await asyncio.wait_for(context.set_extra_http_headers({"Accept-Language": req["acceptLanguage"]}),
                                   run.op_timeout(s.operation_ms))
        if req.get("behaviors"):  # before the page's and the preload scripts (extension scrollHooks)
            await scrollhooks.install(context, run.op_timeout(s.operation_ms))
        await domquiet.install(context, run.op_timeout(s.operation_ms))  # before the page's own scripts
        for script in req.get("preload") or []:
            await context.add_init_script(script=script["source"])
        if run.policies.has_deny():
            sess.gate = deny_gate(run, recorder)
            await context.route("**/*", sess.gate)
        recorder.error_bodies = sess.proxy.error_bodies if sess.proxy is not None else None
        recorder.attach(context)
        max_resp = recorder.max_response_bytes
        recorder.raw_bodies = RawBodies(s.max_task_bytes)
        run.conditional = await conditional.prepare(req.get("conditional"), run.url)  # extension conditional
        asking = run.conditional if run.conditional is not None and run.conditional.original is not None else None
        run.files = FileTaker(sess.cdp, max_resp, run.deadline, on_take=recorder.expect_file, raw=recorder.raw_bodies,
                              rules=run.nav_rules, conditional=asking)  # the request stage only when it may ask
        await asyncio.wait_for(run.files.enable(sess.main_frame), run.op_timeout(s.operation_ms))
    except (PlaywrightError, asyncio.TimeoutError) as e:
        raise CaptureFailure("failed", "connection", f"browser is not usable: {e}"[:500]) from e


async def _open_page(ctx: Ctx, run: Run, browser: Browser, sess: Session, viewport: dict, dpr: int) -> None:
    s = ctx.settings
    if ctx.shared_context is not None and ctx.shared_context.browser is not browser:
        ctx.shared_context = None  # its browser was relaunched or recycled
    if sess.shared and ctx.shared_context is not None and ctx.shared_proxy is not None:
        sess.context, sess.proxy = ctx.shared_context, ctx.shared_proxy
        sess.page = await asyncio.wait_for(sess.context.new_page(), run.op_timeout(s.operation_ms))
        sess.cdp = await asyncio.wait_for(sess.context.new_cdp_session(sess.page), run.op_timeout(s.operation_ms))
        return
    opened: Opened | None = await ctx.spare.take(browser, viewport, dpr, run.op_timeout(s.operation_ms))
    if opened is None:
        opened = await open_context(browser, s.allow_private, viewport, dpr, run.op_timeout(s.operation_ms),
                                    page_user_agent(ctx.browser.user_agent, s.user_agent_suffix))
    sess.context, sess.page, sess.cdp, sess.proxy = opened.context, opened.page, opened.cdp, opened.proxy
    sess.main_frame = opened.main_frame
    if sess.shared:
        if ctx.shared_proxy is not None:
            await ctx.shared_proxy.close()
        ctx.shared_context, ctx.shared_proxy = sess.context, sess.proxy


def deny_gate(run: Run, recorder: Recorder):
    """A route handler that aborts requests a ``deny`` URL policy matches (recorded as denied)."""
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


def refuse_popups(page: Page) -> dict[str, int]:
    """Close every popup the page opens; returns the live counter ``{"refused": n}``."""
    windows = {"refused": 0}

    def on_popup(p: Page) -> None:
        windows["refused"] += 1
        asyncio.ensure_future(p.close())

    page.on("popup", on_popup)
    # A download the file reader did not take (a fallback) must not run on: cancel it at once.
    page.on("download", lambda d: asyncio.ensure_future(d.cancel()))
    return windows


async def seal_network(ctx: Ctx, run: Run, recorder: Recorder, timeout_s: float = 5.0) -> None:
    """Stop recording (waiting ≤ ``timeout_s`` seconds for body fetches) and seal the proxy
    (closes every connection, refuses new ones: the page can no longer reach any site), then note
    in ``run.last_request_end`` when the page's last request ended. From the recorder's stop on,
    ``run.after_seal`` (when set) lists the requests the page still starts. Idempotent."""
    if run.network_sealed:
        return
    try:
        if run.files is not None:
            await run.files.disable()
        await recorder.stop(timeout_s=timeout_s)
    except Exception:  # noqa: BLE001 — a crashed browser cannot be stopped politely
        pass
    finally:
        if run.after_seal is not None:  # formats after the seal: list what the page still asks for
            run.after_seal.watch()
        if run.proxy is not None:
            await run.proxy.end_capture()
        run.network_sealed = True
        run.last_request_end = last_request_end(recorder, run.proxy)
        run.signal_sealed()  # the seal wait may answer now (no request leaves after this)


def last_request_end(recorder: Recorder, proxy: GuardedProxy | None) -> float | None:
    """Monotonic seconds when the page's last network request ended: the last byte (or connection
    attempt) that passed the context's proxy — the only way out, so the site felt nothing later;
    the browser's own events (they arrive 10–80 ms after the bytes, and also for requests served
    from its cache or refused by the deny gate, which no site felt) only without a proxy; the
    seal itself when the recorder stopped with requests in flight (they were cut then); None
    when no request reached a site."""
    end = proxy.last_traffic if proxy is not None else recorder.last_end
    ends = [end] if end is not None else []
    if recorder.cut:
        ends.append(time.monotonic())
    return max(ends) if ends else None


async def seal(ctx: Ctx, run: Run, recorder: Recorder) -> None:
    """What must happen before the response: the network sealed (:func:`seal_network`), page
    format writes of a capture that failed early cancelled, the capture counted."""
    try:
        await seal_network(ctx, run, recorder)
    finally:
        for t in run.uploads:  # a capture that failed early: its writes end on their own
            t.cancel()
        ctx.browser.capture_done()


def teardown_soon(ctx: Ctx, sess: Session) -> None:
    """After the response, in the background: close the capture's context and its proxy (a shared
    session: its page and deny gate only). Never raises. The next capture waits for it only
    when it was a shared session's (:meth:`Ctx.wait_idle`)."""
    ctx.teardowns.append(asyncio.ensure_future(_close(sess)))
    ctx.teardown_blocks = sess.shared
    prepare_soon(ctx)


def prepare_soon(ctx: Ctx) -> None:
    """Start measuring the browser's memory and preparing spare contexts (unless that is under
    way, or the browser is due for recycling: the next capture relaunches it first). Started as
    soon as a capture has taken its context (the next capture may arrive at this one's seal, while
    it packages: issue 11; a held capture's next one right after the previous seal — holdAfter:
    deferring the spare to that seal left it unready, 0.9 → 1.3–1.9 s open-session under load)
    and again after its teardown (a no-op when the spare is ready)."""
    if ctx.preparing is None or ctx.preparing.done():
        ctx.preparing = asyncio.ensure_future(_prepare(ctx))


async def _close(sess: Session) -> None:
    context, page = sess.context, sess.page
    try:
        if sess.shared and context is not None and sess.gate is not None:
            await asyncio.wait_for(context.unroute("**/*", sess.gate), 5)
        if context is not None and not sess.shared:
            await asyncio.wait_for(context.close(), 10)
        elif page is not None:
            await asyncio.wait_for(page.close(), 10)
    except Exception:  # noqa: BLE001 — a crashed browser cannot be closed politely
        pass
    if sess.proxy is not None and not sess.shared:
        await sess.proxy.close()


async def _prepare(ctx: Ctx) -> None:
    s = ctx.settings
    holder = ctx.browser
    browser = holder.browser
    if browser is None or not browser.is_connected():
        return
    try:
        await anyio.to_thread.run_sync(holder.measure_rss)
        if holder.browser is browser and not holder.due_for_recycling():
            await ctx.spare.fill(browser, s.allow_private, s.viewport, s.device_pixel_ratios[-1], s.operation_ms / 1000,
                                 page_user_agent(holder.user_agent, s.user_agent_suffix))
    except Exception:  # noqa: BLE001 — preparation is an optimisation; the next capture opens its own
        log.debug("spare preparation failed", exc_info=True)
