"""Capture server (issue 8 item 5): overhead over the page's own load, and memory over 500 captures.

Parts: a static loopback page (HTML + CSS + one image), the S3 stand-in, and one
``python -m waggle_capture`` process (its own Chromium) — the same server the local stack runs.

* **Own load**: the same Chromium (Playwright, same flags) opens a fresh context and
  ``goto(url, wait_until="load")`` — the time the page itself needs.
* **Overhead** = median ``POST /captures`` round trip − median own load, for a capture of the
  formats a crawl asks for (``wacz`` + ``links``) with the settle wait turned off
  (``loadWait`` min 0 / quiet 0): target ≤ 300 ms. The same with the server's default settle
  wait (min 1,000 ms, quiet 1,000 ms) is reported too, with and without the settle time the
  manifest says was waited. The settle-off captures run twice: back to back (the next request
  waits for the previous capture's context teardown and the preparation of the next one, which
  the server does after answering) and with 1 s idle before each (as a crawl's per-host delay
  leaves it).
* **Head / tail** (what the politeness benchmark's server-felt gap adds to the delay): the
  static site logs each request's arrival (monotonic, same process as the client); head =
  submit → the site's first request of that capture, tail = the site's last request → the
  response received. Measured with the default settle wait and 1 s idle before each capture.
* **Memory** (case C13): resident memory of the server process and all its descendants
  (Chromium) after 50 and after 500 captures; target ratio ≤ 1.5. The memory phase stops at a
  420 s budget (the benchmark must end within 10 minutes); the count reached is reported.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import tempfile
import threading
import time
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

from tests.bench import infra
from tests.bench.harness import Context, summary

FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run", "--disable-quic"]

PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>static bench page</title>
<link rel="stylesheet" href="/style.css"></head><body><h1>A static page</h1>
<p>{text}</p><img src="/pixel.svg" alt="">
{links}
</body></html>"""
CSS = "body{font-family:sans-serif;max-width:40em;margin:auto} h1{color:#345}"
SVG = '<svg xmlns="http://www.w3.org/2000/svg" width="40" height="40"><rect width="40" height="40" fill="#8a4"/></svg>'


class _Quiet(SimpleHTTPRequestHandler):
    arrivals: list[float] = []  # replaced per site: monotonic arrival time of every request

    def do_GET(self) -> None:
        self.arrivals.append(time.monotonic())
        super().do_GET()

    def log_message(self, *args) -> None:
        pass


class SiteUrl(str):
    """The page URL; ``.arrivals`` holds the monotonic arrival time of every request the site got."""

    arrivals: list[float]


@contextlib.contextmanager
def static_site() -> "contextlib.AbstractContextManager[SiteUrl]":
    """A directory with index.html, style.css and pixel.svg served on 127.0.0.1; yields its URL
    (a :class:`SiteUrl`)."""
    with tempfile.TemporaryDirectory(prefix="waggle-bench-site-") as root:
        links = "\n".join(f'<a href="/p{i}.html">page {i}</a>' for i in range(20))
        Path(root, "index.html").write_text(PAGE.format(text="lorem ipsum " * 200, links=links))
        Path(root, "style.css").write_text(CSS)
        Path(root, "pixel.svg").write_text(SVG)
        arrivals: list[float] = []
        handler = type("_Logged", (_Quiet,), {"arrivals": arrivals})
        server = ThreadingHTTPServer(("127.0.0.1", 0), partial(handler, directory=root))
        server.daemon_threads = True
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            url = SiteUrl(f"http://127.0.0.1:{server.server_address[1]}/index.html")
            url.arrivals = arrivals
            yield url
        finally:
            server.shutdown()
            server.server_close()


def own_load_times(url: str, n: int) -> list[float]:
    """Seconds for Chromium to load ``url`` (fresh context each time, ``load`` event)."""
    from playwright.sync_api import sync_playwright

    os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
    out: list[float] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=FLAGS, headless=True)
        try:
            for i in range(n + 2):
                context = browser.new_context(viewport={"width": 1280, "height": 800})
                page = context.new_page()
                t = time.monotonic()
                page.goto(url, wait_until="load")
                elapsed = time.monotonic() - t
                context.close()
                if i >= 2:  # the first two warm the browser up
                    out.append(elapsed)
        finally:
            browser.close()
    return out


def _tree_rss_mb(pid: int) -> tuple[float, float]:
    """(RSS of ``pid`` alone, RSS of ``pid`` + every descendant) in MiB."""
    import psutil

    proc = psutil.Process(pid)
    own = proc.memory_info().rss
    total = own
    for child in proc.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            total += child.memory_info().rss
    return own / 2**20, total / 2**20


def _request(url: str, settle_off: bool) -> dict:
    req = {
        "url": url, "labels": ["bench"], "correlationId": "bench-capture",
        "captureFormats": {"png": False, "webp": False, "html": False, "links": True, "mhtml": False, "wacz": True},
        "signing": False,
    }
    if settle_off:
        req["loadWait"] = {"minMs": 0, "maxMs": 3000, "quietMs": 0, "networkConcurrency": 0}
    return req


def head_tail(arrivals: list[float], submitted: float, answered: float) -> tuple[float, float] | None:
    """(submit → first request, last request → answer) in seconds for requests the site got
    between the two instants; None if it got none."""
    mine = [a for a in list(arrivals) if submitted <= a <= answered]
    return (min(mine) - submitted, answered - max(mine)) if mine else None


def _capture(client: httpx.Client, base: str, url: str, settle_off: bool,
             heads_tails: list | None = None) -> tuple[float, dict]:
    t = time.monotonic()
    r = client.post(f"{base}/captures", json=_request(url, settle_off))
    elapsed = time.monotonic() - t
    if heads_tails is not None and isinstance(url, SiteUrl):
        ht = head_tail(url.arrivals, t, t + elapsed)
        if ht is not None:
            heads_tails.append(ht)
    if r.status_code != 200:
        raise RuntimeError(f"capture answered {r.status_code}: {r.text[:300]}")
    body = r.json()
    report = body.get("report") or {}
    if report.get("status") != "success":
        raise RuntimeError(f"capture did not succeed: {str(body)[:500]}")
    return elapsed, report


async def _profile_captures(url: str, s3_server, n: int) -> tuple[float, str]:
    """``n`` captures run in-process (the server's own ``run_capture``, no HTTP) under
    pyinstrument; returns (median seconds per capture, profile text)."""
    from pyinstrument import Profiler

    from waggle_capture.browser import BrowserHolder
    from waggle_capture.capture import Ctx, run_capture
    from waggle_capture.settings import ServerSettings
    from waggle_capture.sink import S3Sink
    from waggle_capture.validation import validate_request

    settings = ServerSettings(allow_private=True, s3_endpoint=s3_server.endpoint,
                              s3_access_key=s3_server.access_key_id, s3_secret_key=s3_server.secret_access_key)
    holder = BrowserHolder(settings.chromium, settings.recycle_every, settings.max_rss_mb)
    sink = S3Sink(settings.s3_endpoint, settings.s3_bucket, settings.s3_access_key, settings.s3_secret_key,
                  settings.s3_region, settings.s3_key_prefix)
    cctx = Ctx(settings=settings, browser=holder, s3=sink)
    await holder.start()
    times: list[float] = []
    try:
        for _ in range(2):
            await run_capture(cctx, validate_request(_request(url, True)))
        profiler = Profiler(async_mode="enabled", interval=0.002)
        with profiler:
            for _ in range(n):
                t = time.monotonic()
                result = await run_capture(cctx, validate_request(_request(url, True)))
                times.append(time.monotonic() - t)
                if (result.get("report") or {}).get("status") != "success":
                    raise RuntimeError(f"in-process capture failed: {str(result)[:300]}")
    finally:
        await cctx.aclose()
        await holder.close()
    return statistics.median(times), profiler.output_text(unicode=False, color=False)


def capture(ctx: Context) -> None:
    """Capture overhead over the page's own load (≤ 300 ms) and RSS after 500 vs 50 captures (≤ 1.5×)."""
    n_timed = 10 if ctx.quick else 20
    total = 120 if ctx.quick else 500
    first_mark = 50
    # the whole benchmark must end within 10 minutes: the memory phase stops at this budget and
    # says how many captures it reached (on a loaded machine a capture can take seconds)
    budget_s = 150.0 if ctx.quick else 420.0
    with static_site() as page_url, infra.s3() as s3_server:
        own = own_load_times(page_url, n_timed)
        with infra.capture_server(s3_server) as (proc, base):
            with httpx.Client(timeout=180) as client:
                for _ in range(2):  # warm-up (first navigation, first S3 connection)
                    _capture(client, base, page_url, True)
                fast, fast_proc, fast_ht = [], [], []
                for _ in range(n_timed):
                    e, rep = _capture(client, base, page_url, True, fast_ht)
                    fast.append(e)
                    fast_proc.append(rep.get("captureProcessingTimeMs", 0) / 1000)
                idle, idle_ht = [], []
                for _ in range(n_timed):
                    time.sleep(1.0)
                    e, rep = _capture(client, base, page_url, True, idle_ht)
                    idle.append(e)
                dflt, dflt_settle, dflt_ht = [], [], []
                for _ in range(max(5, n_timed // 2)):
                    time.sleep(1.0)
                    e, rep = _capture(client, base, page_url, False, dflt_ht)
                    dflt.append(e)
                    dflt_settle.append((rep.get("settle") or {}).get("waitedMs", 0) / 1000)
                # memory: count captures since the server started (warm-up and timed ones included)
                done = 2 + len(fast) + len(idle) + len(dflt)
                rss: dict[int, tuple[float, float]] = {}
                first_at = 0  # the timed phases may pass first_mark: measure at the first count ≥ it
                status_at: dict[int, dict] = {}
                t_mem = time.monotonic()
                while done < total:
                    _capture(client, base, page_url, True)
                    done += 1
                    over = time.monotonic() - t_mem > budget_s and done > first_mark
                    first = done >= first_mark and not first_at
                    if first:
                        first_at = done
                    if first or done == total or over:
                        time.sleep(0.5)  # let the just-closed context's memory settle the same way both times
                        rss[done] = _tree_rss_mb(proc.pid)
                        status_at[done] = client.get(f"{base}/status").json().get("process", {})
                    if over:
                        break
                mem_s = time.monotonic() - t_mem
                reached = done
    own_med = statistics.median(own)
    import asyncio

    with infra.s3() as s3_server, static_site() as page_url:
        prof_med, prof_text = asyncio.run(_profile_captures(page_url, s3_server, 10 if ctx.quick else 15))
    ctx.detail("profile_in_process", prof_text)
    ctx.metric("in-process capture (no HTTP), median − own load", (prof_med - own_med) * 1000, "ms",
               note="run_capture called directly under pyinstrument; see profile in the JSON")
    ctx.detail("own_load_s", summary(own))
    ctx.detail("capture_settle_off_s", summary(fast))
    ctx.detail("capture_processing_ms_settle_off", summary(fast_proc))
    ctx.detail("capture_default_settle_s", summary(dflt))
    ctx.detail("default_settle_waited_s", summary(dflt_settle))
    ctx.detail("rss_mb", {str(k): {"server": round(v[0], 1), "tree": round(v[1], 1)} for k, v in rss.items()})
    ctx.detail("process_status", {str(k): v for k, v in status_at.items()})
    ctx.detail("memory_phase_s", round(mem_s, 1))
    ctx.metric("own page load (median)", own_med * 1000, "ms", note="same Chromium, fresh context, load event")
    ctx.metric("capture overhead, settle off", (statistics.median(fast) - own_med) * 1000, "ms", 300, "<=",
               "wacz+links, median round trip − own load, back to back", key="overhead_back_to_back_ms")
    ctx.metric("capture overhead, settle off, 1 s idle before", (statistics.median(idle) - own_med) * 1000, "ms",
               300, "<=", "as a crawl's per-host delay leaves the server idle", key="overhead_idle_before_ms")
    ctx.detail("capture_settle_off_idle_s", summary(idle))
    for label, hts in (("settle off, back to back", fast_ht), ("settle off, 1 s idle", idle_ht),
                       ("default settle, 1 s idle", dflt_ht)):
        if hts:
            ctx.metric(f"head (submit → first request), {label}", statistics.median(h for h, _ in hts) * 1000, "ms",
                       note="median")
            ctx.metric(f"tail (last request → answer), {label}", statistics.median(t for _, t in hts) * 1000, "ms",
                       note="median; the default settle's quiet window (1 s) is part of it")
            ctx.detail(f"head_s {label}", summary([h for h, _ in hts]))
            ctx.detail(f"tail_s {label}", summary([t for _, t in hts]))
    ctx.metric("capture overhead, default settle", (statistics.median(dflt) - own_med) * 1000, "ms",
               note="includes the deliberate settle wait (min 1 s, quiet 1 s)")
    net = [d - s for d, s in zip(dflt, dflt_settle)]
    ctx.metric("  … minus settle waited", (statistics.median(net) - own_med) * 1000, "ms", 300, "<=",
               key="overhead_default_settle_net_ms")
    ctx.detail("captures_reached", reached)
    ctx.detail("capture_rate_per_s", round((reached - 2 - len(fast) - len(idle) - len(dflt)) / mem_s, 2)
               if mem_s else None)
    first_mark = first_at
    if first_mark in rss and reached in rss and reached != first_mark:
        ratio = rss[reached][1] / rss[first_mark][1]
        ctx.metric(f"RSS after {first_mark} captures (server+Chromium)", rss[first_mark][1], "MiB")
        ctx.metric(f"RSS after {reached} captures (server+Chromium)", rss[reached][1], "MiB",
                   note="" if reached == total else f"time budget {budget_s:.0f} s reached before {total}")
        ctx.metric(f"RSS ratio {reached}/{first_mark}", ratio, "×", 1.5, "<=",
                   f"server alone {rss[reached][0] / rss[first_mark][0]:.2f}×; "
                   f"launches {status_at[reached].get('launches')}, recycles {status_at[reached].get('recycles')}", key="rss_ratio")
