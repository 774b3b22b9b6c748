"""Long real pages (issue 11 item 4): where a capture's time goes on Debian's Python 3.11 docs.

Parts: ``/usr/share/doc/python3.11/html`` (package ``python3.11-doc``) served on 127.0.0.1 by a
request-logging server, the S3 stand-in, and one ``python -m waggle_capture`` process.

For each page of :data:`PAGES` (the docs' long documents plus a short one), with 1 s idle before
each capture (as a crawl's delay leaves the server) and the server's default settle wait:

* **crawl formats** (``wacz`` + ``links``, what ``WAGGLE_CAPTURE_FORMATS`` gives a crawl) and
  **all formats** (all six, ``fullPage``): the round trip, and the server's own per-phase timers
  (``GET /status`` → ``process.lastPhasesMs``): head (submit → the site's first request), load,
  settle, formats, seal, WACZ, uploads, manifest, tail (the site's last request → answer) and
  ``sinceLastRequestMs``;
* the same two **with the default page scripts** (``+autoscroll``: the catalogue's
  ``autoscroll`` compiled as the crawl compiles it, default options) — what a crawl with the
  default scripts experiences; its report (``stoppedBy``, ``reacts``, steps, elapsed ms) is read
  from the WACZ's behavior reports;
* **target**: each long page's capture within 1 s of the short page's (median round trip, all
  four modes);
* ``before``: one capture of ``contents.html`` with autoscroll's ``scrollStatic: true, quickMs:
  250, idleSteps: 0`` — every step followed by the full 250 ms, through a page without scroll hooks: what every
  page got before the ``scrollHooks`` extension (and still gets from a real BrowserHive v12);
* one in-process capture of the longest page under pyinstrument (profile text in the JSON).
* **Chromium alone**: every page loaded by Playwright straight from the site (no proxy, recorder,
  file reader or formats; same Chromium, flags and viewport), interleaved: navigation → load
  event, the page's navigation timing and the renderer's busy time (CDP ``Performance``) — the
  floor of a capture's load phase (issue 11 round 22: ``contents.html``'s load is Chromium's).
"""

from __future__ import annotations

import contextlib
import statistics
import threading
import time
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

from tests.bench import infra
from tests.bench.harness import Context, summary

DOCS = Path("/usr/share/doc/python3.11/html")
SHORT = "copyright.html"
PAGES = [SHORT, "contents.html", "whatsnew/3.11.html", "glossary.html", "license.html", "library/os.html"]
ALL = {"png": True, "webp": True, "html": True, "links": True, "mhtml": True, "wacz": True}
CRAWL = {**{k: False for k in ALL}, "links": True, "wacz": True}
# Phases in the order the server marks them (waggle_capture/*: Run.mark); grouped for the table.
GROUPS = {
    "head (server)": ("wait-idle", "check-address", "browser", "open-session"),
    "load": ("load",),
    "settle": ("settle",),
    "behaviors": ("behaviors", "dismiss-behaviors"),  # banners, behaviors and the settle after them
    "formats": ("title-links", "screenshots", "dom-formats", "page-formats"),  # the last two before issue 11's second round
    "seal": ("seal",),
    "WACZ": ("package-wacz",),
    "uploads": ("uploads", "upload-wacz"),
    "manifest": ("manifest",),
}


class _Logged(SimpleHTTPRequestHandler):
    arrivals: list[float] = []  # replaced per server: monotonic arrival of every request

    def do_GET(self) -> None:
        self.arrivals.append(time.monotonic())
        super().do_GET()

    def log_message(self, *args) -> None:
        pass


@contextlib.contextmanager
def docs_site():
    """The docs served on 127.0.0.1; yields (base URL, arrivals list)."""
    if not (DOCS / "contents.html").exists():
        raise RuntimeError(f"{DOCS} missing: apt-get install python3.11-doc")
    arrivals: list[float] = []
    handler = type("_DocsLogged", (_Logged,), {"arrivals": arrivals})
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(handler, directory=str(DOCS)))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", arrivals
    finally:
        server.shutdown()
        server.server_close()


def _request(url: str, formats: dict, behaviors: list[dict] | None = None) -> dict:
    req = {"url": url, "labels": ["bench"], "correlationId": "real-pages", "captureFormats": formats,
           "signing": False, "fullPage": formats["png"]}
    if behaviors:
        req["behaviors"] = behaviors
    return req


def default_autoscroll(**options) -> dict:
    """The catalogue's ``autoscroll`` as a crawl sends it: compiled (TypeScript + host types) by
    the ts-compile stand-in's compiler, with ``options`` (default none)."""
    import hashlib

    from devstack.tscompile.child import NodeCompiler
    from ledger.crawl.scripts import default_catalogue

    (shipped,) = [s for s in default_catalogue() if s["id"] == "autoscroll"]
    compiler = NodeCompiler(timeout_s=240)
    try:
        js = compiler.compile([{"id": "autoscroll", "source": shipped["source"]}])["outputs"]["autoscroll"]
    finally:
        compiler.close()
    return {"id": "autoscroll", "source": js, "sha256": hashlib.sha256(js.encode()).hexdigest(), "options": options}


def _behavior_reports(s3_server, location: str) -> list[dict]:
    """A WACZ's behavior reports (datapackage ``browserhive:capture.behaviorReports``; before
    decision 391 the member ``behaviors/reports.jsonl``)."""
    import io
    import json
    import zipfile

    key = location.split("/", 3)[3]
    data = s3_server.client().get_object(Bucket=s3_server.bucket, Key=key)["Body"].read()
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        if "behaviors/reports.jsonl" in z.namelist():
            return [json.loads(x) for x in z.read("behaviors/reports.jsonl").decode().splitlines()]
        return json.loads(z.read("datapackage.json"))["browserhive:capture"].get("behaviorReports", [])


def _one(client: httpx.Client, base: str, url: str, formats: dict, arrivals: list[float],
         behaviors: list[dict] | None = None, s3_server=None) -> dict:
    """One capture; returns its round trip, head, tail, sinceLastRequestMs and phases (ms), and
    with ``behaviors`` their reports (``s3_server`` to read them from the WACZ)."""
    t = time.monotonic()
    r = client.post(f"{base}/captures", json=_request(url, formats, behaviors))
    answered = time.monotonic()
    body = r.json()
    if r.status_code != 200:
        raise RuntimeError(f"capture of {url} answered {r.status_code}: {r.text[:400]}")
    mine = [a for a in list(arrivals) if t <= a <= answered]
    phases = client.get(f"{base}/status").json()["process"]["lastPhasesMs"]
    row = {"total": (answered - t) * 1000, "since_last_request": body.get("sinceLastRequestMs"),
           "head": (min(mine) - t) * 1000 if mine else None, "tail": (answered - max(mine)) * 1000 if mine else None,
           "requests": len(mine), "status": body["report"]["status"]}
    if body["report"]["status"] != "success":
        row["error"] = body["report"].get("errorDetails")
    for group, names in GROUPS.items():
        row[group] = sum(phases.get(n, 0) for n in names)
    row["phases"] = phases
    if behaviors and s3_server is not None and body["report"]["status"] == "success":
        row["behaviors_report"] = _behavior_reports(s3_server, body["report"]["artifacts"]["wacz"])
    return row


def _median(rows: list[dict], key: str) -> float | None:
    vals = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(vals) if vals else None


async def _profile(url: str, s3_server, formats: dict) -> str:
    """One in-process capture of ``url`` (after one warm-up) under pyinstrument; the profile text."""
    from pyinstrument import Profiler

    from waggle_capture.browser import BrowserHolder
    from waggle_capture.capture import Ctx, run_capture
    from waggle_capture.settings import ServerSettings
    from waggle_capture.sink import S3Sink
    from waggle_capture.validation import validate_request

    s = ServerSettings(allow_private=True, s3_endpoint=s3_server.endpoint,
                       s3_access_key=s3_server.access_key_id, s3_secret_key=s3_server.secret_access_key)
    holder = BrowserHolder(s.chromium, s.recycle_every, s.max_rss_mb)
    sink = S3Sink(s.s3_endpoint, s.s3_bucket, s.s3_access_key, s.s3_secret_key, s.s3_region, s.s3_key_prefix)
    cctx = Ctx(settings=s, browser=holder, s3=sink)
    await holder.start()
    try:
        await run_capture(cctx, validate_request(_request(url, formats)))
        profiler = Profiler(async_mode="enabled", interval=0.002)
        with profiler:
            await run_capture(cctx, validate_request(_request(url, formats)))
        await cctx.wait_idle()
    finally:
        await cctx.aclose()
        await holder.close()
    return profiler.output_text(unicode=False, color=False, show_all=False)


# The page's own navigation timing and the renderer's busy time (CDP Performance metrics, s).
_NAV_JS = """() => { const n = performance.getEntriesByType("navigation")[0];
  return {responseEnd: n.responseEnd, domInteractive: n.domInteractive, loadEventEnd: n.loadEventEnd}; }"""
_BUSY = ("TaskDuration", "LayoutDuration", "RecalcStyleDuration", "ScriptDuration")


async def _chromium_alone(site: str, pages: list[str], reps: int) -> dict[str, list[dict]]:
    """Each page loaded by Playwright straight from the site (same Chromium, flags and viewport as
    the capture server; no proxy, recorder, file reader or formats), pages interleaved: the
    navigation → load event wall time, the page's own navigation timing and the renderer's busy
    time during it (ms). What a capture's load phase cannot go below."""
    from playwright.async_api import async_playwright

    from waggle_capture.browser import CHROMIUM, FLAGS
    from waggle_capture.settings import ServerSettings

    viewport = ServerSettings().viewport
    out: dict[str, list[dict]] = {p: [] for p in pages}
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            for i in range(reps + 1):  # the first round warms up
                for page_name in pages:
                    context = await browser.new_context(viewport=viewport)
                    page = await context.new_page()
                    cdp = await context.new_cdp_session(page)
                    await cdp.send("Performance.enable")
                    before = {m["name"]: m["value"] for m in (await cdp.send("Performance.getMetrics"))["metrics"]}
                    t = time.monotonic()
                    await page.goto(site + page_name, wait_until="load", timeout=120_000)
                    row: dict = {"load": (time.monotonic() - t) * 1000}
                    after = {m["name"]: m["value"] for m in (await cdp.send("Performance.getMetrics"))["metrics"]}
                    row.update({k: (after[k] - before.get(k, 0)) * 1000 for k in _BUSY if k in after})
                    row.update(await page.evaluate(_NAV_JS))
                    await context.close()
                    if i:
                        out[page_name].append(row)
        finally:
            await browser.close()
    return out


def real_pages(ctx: Context) -> None:
    """Captures of the Python docs' longest pages vs a short one, per phase (target: within 1 s)."""
    reps = 1 if ctx.quick else 3
    auto = default_autoscroll()
    modes = {"crawl": (CRAWL, None), "all": (ALL, None), "crawl+autoscroll": (CRAWL, [auto]),
             "all+autoscroll": (ALL, [auto])}
    results: dict[str, dict[str, list[dict]]] = {label: {} for label in modes}
    ctx.size = f"{reps} capture(s) of each of {len(PAGES)} pages per mode" + (" (quick)" if ctx.quick else "")
    cpu_per_page: dict[str, float] = {}
    with docs_site() as (site, arrivals), infra.s3() as s3_server:
        with infra.capture_server(s3_server) as (proc, base):
            with httpx.Client(timeout=180) as client:
                _one(client, base, site + SHORT, ALL, arrivals, [auto])  # warm-up
                for label, (formats, behaviors) in modes.items():
                    cpu0 = infra.tree_cpu_s(proc.pid)
                    for _ in range(reps):
                        for page in PAGES:
                            time.sleep(1.0)
                            results[label].setdefault(page, []).append(
                                _one(client, base, site + page, formats, arrivals, behaviors, s3_server))
                    cpu_per_page[label] = (infra.tree_cpu_s(proc.pid) - cpu0) / (reps * len(PAGES))
                for label, cpu in cpu_per_page.items():
                    # The crawl's formats with the default page scripts are what a crawl's page costs.
                    ctx.metric(f"{label}: capture server + Chromium CPU per page", cpu, "s",
                               note=f"mean over {reps * len(PAGES)} captures of the {len(PAGES)} pages",
                               key="cpu_s_per_page" if label == "crawl+autoscroll" else None)
                if not ctx.quick:
                    time.sleep(1.0)
                    before = _one(client, base, site + "contents.html", CRAWL, arrivals,
                                  [default_autoscroll(scrollStatic=True, quickMs=250, idleSteps=0)], s3_server)
                    ctx.metric("before: contents.html, crawl formats, autoscroll at the old pace",
                               before["total"], "ms", note=f"behaviors {before['behaviors']:.0f} ms")
                    ctx.detail("before contents.html crawl+autoscroll old pace", before)
        import asyncio

        ctx.detail("profile_contents_all_formats", asyncio.run(_profile(site + "contents.html", s3_server, ALL)))
        alone = asyncio.run(_chromium_alone(site, PAGES, reps))
    _report_alone(ctx, alone)
    _report(ctx, results)


def _report(ctx: Context, results: dict[str, dict[str, list[dict]]]) -> None:
    keys = ["total", "head", *GROUPS, "tail", "since_last_request"]
    for label, by_page in results.items():
        short = _median(by_page[SHORT], "total")
        short_own = _median([{"x": r["total"] - r["load"]} for r in by_page[SHORT]], "x")
        for page, rows in by_page.items():
            med = {k: _median(rows, k) for k in keys}
            ctx.detail(f"{label} {page}", {"median_ms": med, "rows": rows})
            parts = ", ".join(f"{k} {med[k]:.0f}" for k in keys[1:] if med[k] is not None)
            scrolls = [line["data"] for r in rows for line in r.get("behaviors_report", [])
                       if line.get("id") == "autoscroll" and "data" in line]
            if scrolls:
                parts += "; autoscroll " + ", ".join(sorted({f"{d['stoppedBy']} {d.get('reacts')}" for d in scrolls}))
            if page == SHORT:
                ctx.metric(f"{label}: {page} (short) capture", med["total"], "ms", note=parts)
            else:
                ctx.metric(f"{label}: {page} − short", med["total"] - short, "ms", 1000, "<=", parts)
                own = _median([{"x": r["total"] - r["load"]} for r in rows], "x")
                ctx.metric(f"{label}: {page} − short, the page's own load excluded",
                           own - short_own, "ms", 1000, "<=", "round trip − the load phase (navigation to load event)")
        ctx.detail(f"{label} total_ms", {p: summary([r["total"] for r in rows]) for p, rows in by_page.items()})


def _report_alone(ctx: Context, alone: dict[str, list[dict]]) -> None:
    """The pages' loads in Chromium alone: medians, and each long page − the short one."""
    short = _median(alone[SHORT], "load")
    for page, rows in alone.items():
        med = {k: _median(rows, k) for k in rows[0]}
        ctx.detail(f"chromium alone {page}", {"median_ms": med, "rows": rows})
        note = ", ".join(f"{k} {med[k]:.0f}" for k in rows[0] if k != "load" and med[k] is not None)
        if page == SHORT:
            ctx.metric(f"Chromium alone: {page} (short) load", med["load"], "ms", note=note)
        else:
            ctx.metric(f"Chromium alone: {page} load − short", med["load"] - short, "ms", note=note)
