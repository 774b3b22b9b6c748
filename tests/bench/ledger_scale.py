"""Ledger scale (issue 8 item 4): level report, signing endpoint, outbox, reconciler.

All against real parts: Postgres (pgserver), the S3 stand-in, the real OpenFGA server and
``waggle serve`` in a subprocess, reached over loopback HTTP.

* ``level-report``: a crawl holding 1,000,000 pages (bulk-loaded with COPY) receives a level
  report of 1,000 captured results carrying 100,000 links inline (level report v2; 90 % new,
  10 % already known) and manifest summaries. Target ≤ 2 s for the ``POST
  /api/crawls/:id/pages`` round trip; then the admission after the answer (1,000 manifests
  from S3) is timed, and the old shape (``linksLocation`` only: 1,000 ``.links.json`` read
  before answering) on a fresh copy. A third copy is run in-process under pyinstrument to say
  where the time goes.
* ``level-report-curve``: the same report in-process (``record_level``, v2 body) at 10k / 100k /
  1M pages held × 10k / 100k links.
* ``signing``: ``POST /api/archives/:id/url`` with a fixed-concurrency async load generator.
  Targets ≥ 300 req/s and p99 ≤ 50 ms.
* ``outbox``: 7,000 queued rows (one archive = 3 tuples per row) delivered by
  ``drain_all`` batch after batch for at most 60 s; target ≥ 1,000 tuples/s.

* ``reconciler``: 100,000 pending ``capture_submissions``; the first 6,000 (in the
  reconciler's order) have manifests in S3 (uploading all 100,000 to s3rver would take longer
  than the 10-minute budget), the rest are missing there. One ``reconcile`` pass runs for at
  most 150 s; the rate (rows looked at per second) and the projected full pass are reported
  (no target), with the time split between S3 reads and admission transactions.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from pathlib import Path

import httpx
import psycopg

from tests.bench import infra
from tests.bench.harness import Context, percentile, summary

HOSTS = 20
ORG = "acme"
SUBJECT = "alice"


def _site(i: int) -> str:
    return f"https://h{i:02d}.bench-site.example"


def _manifest(task_id: str, crawl_id: str, url: str, bucket: str = "browserhive") -> dict:
    """A v12 ``CaptureResultReport`` for a successful capture (contracts.md §B.3)."""
    return {
        "taskId": task_id, "correlationId": crawl_id, "url": url, "labels": [], "status": "success",
        "timestamp": "2026-11-29T12:00:00.000Z", "captureProcessingTimeMs": 900, "httpStatusCode": 200,
        "artifacts": {"wacz": f"s3://{bucket}/{task_id}_{crawl_id}.wacz",
                      "links": f"s3://{bucket}/{task_id}_{crawl_id}.links.json"},
        "completeness": {"bodylessUrls": [], "truncatedUrls": [], "complete": True},
    }


def _put_all(s3_server, objects: dict[str, bytes], workers: int = 8) -> None:
    client = s3_server.client()

    def put(item: tuple[str, bytes]) -> None:
        client.put_object(Bucket=s3_server.bucket, Key=item[0], Body=item[1], ContentType="application/json")

    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(put, objects.items()))


def _migrate(url: str) -> None:
    from ledger.db.migrate import migrate

    migrate(url)


def _load_crawl(db_url: str, *, pages: int, pending: int, depth: int) -> tuple[str, list[str]]:
    """Insert one running crawl with ``pages`` rows (``pending`` of them at ``depth``, the rest
    captured at lower depths) by COPY. Returns (crawl id, urls of the pending rows)."""
    crawl_id = str(uuid.uuid4())
    seeds = [f"{_site(i)}/" for i in range(HOSTS)]
    with psycopg.connect(db_url) as conn:
        conn.execute(
            "INSERT INTO crawls (id, seeds, scope, max_depth, max_pages, per_host_delay_ms, host_parallelism,"
            " org_id, requested_by, current_depth, pages_discovered)"
            " VALUES (%s, %s, 'same-origin', 10, 5000000, 2000, 4, %s, %s, %s, %s)",
            (crawl_id, seeds, ORG, SUBJECT, depth, pages - HOSTS),  # every page but the seeds was discovered
        )
        done = pages - pending
        finished = datetime(2026, 11, 29, 11, 0, tzinfo=timezone.utc)
        pending_urls: list[str] = []
        with conn.cursor().copy(
            "COPY crawl_pages (crawl_id, url, url_key, depth, host, state, submitted_at, finished_at) FROM STDIN"
        ) as copy:
            buf = io.StringIO()
            for n in range(pages):
                host_i = n % HOSTS
                host = f"h{host_i:02d}.bench-site.example"
                if n < done:
                    d = 0 if n < HOSTS else (1 if n < done // 3 else 2)
                    url = f"{_site(host_i)}/" if n < HOSTS else f"{_site(host_i)}/d{d}/p{n}"
                    ts = (finished + timedelta(milliseconds=n)).isoformat()
                    buf.write(f"{crawl_id}\t{url}\t{url}\t{d}\t{host}\tcaptured\t{ts}\t{ts}\n")
                else:
                    url = f"{_site(host_i)}/d{depth}/p{n}"
                    pending_urls.append(url)
                    buf.write(f"{crawl_id}\t{url}\t{url}\t{depth}\t{host}\tpending\t\\N\t\\N\n")
                if n % 50_000 == 49_999:
                    copy.write(buf.getvalue())
                    buf = io.StringIO()
            copy.write(buf.getvalue())
        conn.commit()
        conn.execute("ANALYZE crawl_pages")
        conn.commit()
    return crawl_id, pending_urls


def _report_body(crawl_id: str, depth: int, pending_urls: list[str], task_ids: list[str],
                 links: list[list[dict]] | None = None) -> dict:
    """The level report. With ``links`` (one list per result): level report v2 — inline links
    and a manifest summary, as crawl_host sends them when the capture answer has inline links;
    without: the old shape (``linksLocation`` only, what a real BrowserHive v12 allows)."""
    results = []
    for j, (url, task) in enumerate(zip(pending_urls, task_ids)):
        result = {
            "url": url, "status": "captured", "taskId": task, "correlationId": crawl_id,
            "submittedAt": "2026-11-29T12:00:00Z", "finishedAt": "2026-11-29T12:00:01Z",
            "manifestLocation": f"s3://browserhive/{task}_{crawl_id}.result.json",
            "linksLocation": f"s3://browserhive/{task}_{crawl_id}.links.json",
        }
        if links is not None:
            result["links"] = [{"href": item["href"], "rel": item["rel"]} for item in links[j]]
            result["manifestSummary"] = {"status": "success", "wacz": f"s3://browserhive/{task}_{crawl_id}.wacz"}
        results.append(result)
    return {"depth": depth, "results": results,
            "compiled": {"typescript": "6.0.3", "hostTypes": "v0.2.0", "scripts": []}}


def _links_of(crawl_id: str, pending_urls: list[str], pages: int, n_results: int, links_per: int,
              depth: int) -> list[list[dict]]:
    """Each result's links: 10 % pages the crawl holds (captured at depth 1–2), 90 % new."""
    out = []
    known_base = HOSTS  # first captured non-seed page index
    done = pages - n_results
    for j in range(len(pending_urls)):
        host_i = j % HOSTS
        links = []
        for k in range(links_per):
            if k < links_per // 10:
                n = known_base + ((j * 97 + k * 7919) % (done - known_base))
                n = n - n % HOSTS + host_i
                if n >= done:
                    n -= HOSTS
                d = 1 if n < done // 3 else 2
                href = f"{_site(host_i)}/d{d}/p{n}"
            else:
                href = f"{_site(host_i)}/d{depth + 1}/r{j}/l{k}"
            links.append({"href": href, "text": f"link {k}", "rel": None})
        out.append(links)
    return out


def _post_report(url: str, crawl_id: str, payload: bytes) -> tuple[float, dict]:
    t0 = time.monotonic()
    resp = httpx.post(f"{url}/api/crawls/{crawl_id}/pages", content=payload,
                      headers={**infra.who(SUBJECT, ORG), "Content-Type": "application/json"}, timeout=600)
    elapsed = time.monotonic() - t0
    if resp.status_code != 200:
        raise RuntimeError(f"level report answered {resp.status_code}: {resp.text[:500]}")
    return elapsed, resp.json()


def _count(db_url: str, sql: str) -> int:
    with psycopg.connect(db_url) as conn:
        return conn.execute(sql).fetchone()[0]


def _until_archives(db_url: str, want: int, since: float, budget_s: float = 120.0) -> float | None:
    """Seconds from ``since`` until ``archives`` holds ``want`` rows (None: not within budget)."""
    while time.monotonic() - since < budget_s:
        if _count(db_url, "SELECT count(*) FROM archives") >= want:
            return time.monotonic() - since
        time.sleep(0.05)
    return None


def _pyinstrument_text(profiler) -> str:
    return profiler.output_text(unicode=False, color=False, show_all=False, timeline=False)


PROGRESS_SENDERS = 8  # hosts capturing at once (each sends its pages' events in order)
PROGRESS_CAPTURE_S = 0.3  # from a page's started to its done (longer than the poster's linger, as real captures are)


def _send_progress(url: str, crawl_id: str, pending_urls: list[str], task_ids: list[str],
                   links: list[list[dict]], postmaster: int, ledger_pid: int, capture_s: float = PROGRESS_CAPTURE_S,
                   batches: bool = True) -> dict:
    """The level's progress events as ``crawl_host`` sends them: per page a ``started`` and,
    ``capture_s`` later, a ``done`` carrying the capture and the page's links, from
    ``PROGRESS_SENDERS`` hosts at once, each through its own ``f/waggle/progress.py`` poster
    (batches: a done goes with the next page's started; one request per event without
    ``batches``). Returns the done events' latency (queued
    → answered, the poster's linger included), the requests sent and the CPU of the ledger and
    of Postgres over the whole phase."""
    from f.waggle.progress import ProgressPoster

    headers = {**infra.who(SUBJECT, ORG)}
    latencies: list[float] = []
    queued: dict[str, float] = {}
    failures: list[str] = []

    def host(k: int) -> int:
        with httpx.Client(timeout=60) as http:
            def send(body: dict) -> httpx.Response:
                resp = http.post(f"{url}/api/crawls/{crawl_id}/progress", json=body, headers=headers)
                answered = time.monotonic()
                for event in body.get("events", [body]):
                    if event["phase"] == "done":
                        latencies.append(answered - queued[event["url"]])
                return resp

            poster = ProgressPoster(send, log=failures.append)
            poster.no_batch = not batches  # as with a ledger before batches: one request per event
            for j in range(k, len(pending_urls), PROGRESS_SENDERS):
                page, task = pending_urls[j], task_ids[j]
                poster(page, "started")
                time.sleep(capture_s)
                queued[page] = time.monotonic()
                poster(page, "done", {"status": "captured", "taskId": task,
                                      "manifestLocation": f"s3://browserhive/{task}_{crawl_id}.result.json",
                                      "manifestSummary": {"status": "success",
                                                          "wacz": f"s3://browserhive/{task}_{crawl_id}.wacz"},
                                      "links": [{"href": item["href"], "rel": item["rel"]} for item in links[j]]})
            events = 2 * len(range(k, len(pending_urls), PROGRESS_SENDERS))
            until = time.monotonic() + 300  # close() waits 3 s at most: here every event must land
            while poster.sent + poster.failed < events and time.monotonic() < until:
                time.sleep(0.05)
            poster.close()
            if poster.sent != events:
                raise RuntimeError(f"progress events not all recorded: {poster.sent} of {events}; {failures[:3]}")
            return poster.requests

    c0, p0, t0 = _tree_cpu_s(ledger_pid), _pg_cpu(postmaster), time.monotonic()
    with ThreadPoolExecutor(PROGRESS_SENDERS) as pool:
        requests = sum(pool.map(host, range(PROGRESS_SENDERS)))
    return {"wall_s": round(time.monotonic() - t0, 2), "ledger_cpu_s": round(_tree_cpu_s(ledger_pid) - c0, 2),
            "postgres_cpu_s": round(_pg_cpu(postmaster) - p0, 2), "events": len(latencies), "requests": requests,
            "done_p50_s": round(percentile(latencies, 50), 4), "done_p99_s": round(percentile(latencies, 99), 4),
            "done_max_s": round(max(latencies), 4)}


def _postmaster(db_url: str) -> int:
    import psutil

    with psycopg.connect(db_url) as conn:
        return psutil.Process(conn.execute("SELECT pg_backend_pid()").fetchone()[0]).ppid()


def level_report(ctx: Context) -> None:
    """1,000 results + 100,000 links against a crawl of 1,000,000 pages; target ≤ 2 s for the
    report after the level's progress events put the links into the frontier (issue 14, fourth
    round); the same report without them (the old path) and the old shape for comparison."""
    pages = 100_000 if ctx.quick else 1_000_000
    n_results, links_per = 1000, 100
    depth = 3
    ctx.detail("size", {"pages": pages, "results": n_results, "links": n_results * links_per, "hosts": HOSTS})
    ctx.size = f"{n_results:,} results, {n_results * links_per:,} links, {pages:,} pages held"
    with infra.postgres() as pg, infra.s3() as s3_server, infra.fga(pg) as store, infra.webhook() as hook:
        store.write(writes=[f"user:{SUBJECT} submitter organization:{ORG}"])
        template = pg.new_db()
        _migrate(template)
        t0 = time.monotonic()
        crawl_id, pending_urls = _load_crawl(template, pages=pages, pending=n_results, depth=depth)
        ctx.detail("copy_load_s", round(time.monotonic() - t0, 2))
        # artifacts: one manifest + one links file per result; links 90 % new, 10 % known pages
        task_ids = [str(uuid.uuid4()) for _ in pending_urls]
        links = _links_of(crawl_id, pending_urls, pages, n_results, links_per, depth)
        objects: dict[str, bytes] = {}
        for j, (url, task) in enumerate(zip(pending_urls, task_ids)):
            objects[f"{task}_{crawl_id}.links.json"] = json.dumps(
                {"url": url, "finalUrl": url, "links": links[j]}).encode()
            objects[f"{task}_{crawl_id}.result.json"] = json.dumps(_manifest(task, crawl_id, url)).encode()
        t0 = time.monotonic()
        _put_all(s3_server, objects)
        ctx.detail("s3_upload_s", round(time.monotonic() - t0, 2))
        body = _report_body(crawl_id, depth, pending_urls, task_ids, links)
        old_body = _report_body(crawl_id, depth, pending_urls, task_ids)
        tpl_name = pg.db_name(template)
        env = None
        expected_new = n_results * (links_per - links_per // 10)

        # 1. timed: the real route on `waggle serve`, over loopback HTTP (v2 body) after the
        #    level's progress events carried the links, then the admission that follows the
        #    answer; 2. the same without progress links; 3. the old shape (fallback), each on a
        #    fresh copy
        for label, report in (("v2 + progress", body), ("v2", body), ("old shape", old_body)):
            db_http = pg.new_db(template=tpl_name)
            env = infra.ledger_env(db_http, store, s3_server, hook, WAGGLE_DRAIN_INTERVAL_S="3600",
                                   WAGGLE_RECONCILE_INTERVAL_S="3600", WAGGLE_WATCHDOG_INTERVAL_S="3600")
            with psycopg.connect(db_http, autocommit=True) as conn:
                conn.execute("CHECKPOINT")  # every report meets a fresh checkpoint (full-page writes)
            with infra.ledger(env) as led:
                payload = json.dumps(report).encode()
                if label == "v2 + progress":
                    events = _send_progress(led.url, crawl_id, pending_urls, task_ids, links, _postmaster(db_http),
                                            led.proc.pid)
                    ctx.detail("progress events", events)
                    with psycopg.connect(db_http, autocommit=True) as conn:
                        conn.execute("CHECKPOINT")  # the report meets a fresh checkpoint too
                    early = _count(db_http, "SELECT count(*) FROM crawl_pages WHERE from_progress")
                    ctx.detail("rows landed from progress", early)
                load = os.getloadavg()[0]
                postmaster = _postmaster(db_http)
                c0, p0 = _tree_cpu_s(led.proc.pid), _pg_cpu(postmaster)
                elapsed, answer = _post_report(led.url, crawl_id, payload)
                cpu = (round(_tree_cpu_s(led.proc.pid) - c0, 2), round(_pg_cpu(postmaster) - p0, 2))
                ctx.detail(f"{label}: report CPU (ledger, Postgres) s", cpu)
                answered = time.monotonic()
                admitted_after = _until_archives(db_http, n_results, answered)
            archives = _count(db_http, "SELECT count(*) FROM archives")
            total = _count(db_http, "SELECT count(*) FROM crawl_pages")
            ctx.detail(f"{label}: answer_next", len(answer["next"]))
            ctx.detail(f"{label}: archives_admitted", archives)
            ctx.detail(f"{label}: pages_after", total)
            ctx.detail(f"{label}: request_bytes", len(payload))
            if len(answer["next"]) != expected_new or archives != n_results:
                raise RuntimeError(f"{label}: unexpected outcome: next {len(answer['next'])} (want {expected_new}),"
                                   f" archives {archives} (want {n_results})")
            if label == "v2 + progress":
                ctx.metric("level report round trip (links landed from progress)", elapsed, "s", 2.0, "<=",
                           f"{n_results} results, {n_results * links_per:,} links inline, {pages:,} pages held;"
                           f" load {load:.2f}", key="round_trip_s")
                ctx.metric("  its CPU: ledger + Postgres", cpu[0] + cpu[1], "s",
                           note=f"ledger {cpu[0]} s, Postgres {cpu[1]} s (the answer before admission)")
                ctx.metric("  progress events: ledger CPU", events["ledger_cpu_s"], "s",
                           note=f"{events['events']} done + {events['events']} started events in"
                                f" {events['requests']} requests over {events['wall_s']} s")
                ctx.metric("  progress events: Postgres CPU", events["postgres_cpu_s"], "s")
                ctx.metric("  progress done event latency p50", events["done_p50_s"], "s")
                ctx.metric("  progress done event latency p99", events["done_p99_s"], "s")
                ctx.metric("  admission after the answer (1,000 manifests)", admitted_after, "s",
                           note="answer → last archive row; off the critical path")
            elif label == "v2":
                ctx.metric("  v2 without progress links (the old path)", elapsed, "s",
                           note=f"load {load:.2f}; CPU ledger {cpu[0]} s, Postgres {cpu[1]} s")
            else:
                ctx.metric("  old shape (linksLocation only, real BrowserHive v12)", elapsed, "s",
                           note="the ledger reads 1,000 .links.json before answering")

        if ctx.quick:  # the profile explains a figure; a quick run records the figures only
            return
        # 4. where the time goes: the same report in-process under pyinstrument on a fresh copy
        #    of the same crawl, after the level's progress events (sent to `waggle serve` on
        #    that copy), with per-statement wall times
        db_prof = pg.new_db(template=tpl_name)
        with infra.ledger(infra.ledger_env(db_prof, store, s3_server, hook, WAGGLE_DRAIN_INTERVAL_S="3600",
                                           WAGGLE_RECONCILE_INTERVAL_S="3600",
                                           WAGGLE_WATCHDOG_INTERVAL_S="3600")) as led:
            _send_progress(led.url, crawl_id, pending_urls, task_ids, links, _postmaster(db_prof), led.proc.pid,
                           capture_s=0.0)  # only the rows they leave matter here
        with psycopg.connect(db_prof, autocommit=True) as conn:
            conn.execute("CHECKPOINT")
        phases, text = asyncio.run(_profile_level(db_prof, env, crawl_id, body))
        ctx.detail("profile_scope", f"the whole report ({n_results} results, {n_results * links_per:,} links),"
                                    " in-process, fresh copy, after the level's progress events")
        ctx.detail("phases_s", phases)
        ctx.detail("profile", text)
        for name, secs in phases.items():
            if name == "queries":
                for q, v in secs.items():
                    ctx.metric(f"  SQL ×{v['calls']}: {q[:60]}…", v["seconds"], "s")
                continue
            ctx.metric(f"  phase: {name}", secs, "s", note="in-process, pyinstrument on")


async def _profile_level(db_url: str, env: dict[str, str], crawl_id: str, body: dict) -> tuple[dict, str]:
    """Run ``record_level`` in-process on a fresh copy; returns (phase seconds, profile text).

    Phases are timed by wrapping the module-level functions that ``record_level`` calls
    (frontier insert, links reads, scope, budget) — no change to the ledger's code.
    """
    from pyinstrument import Profiler

    import ledger.crawl.levels as levels
    from ledger.services import build_services
    from ledger.settings import Settings

    settings = Settings(_env_file=None, **{k[len("WAGGLE_"):].lower(): v for k, v in env.items()
                                           if k.startswith("WAGGLE_")})
    settings.database_url = db_url
    services = await build_services(settings)
    phases: dict[str, float] = {}

    def timed_async(name, fn):
        async def wrapper(*a, **kw):
            t = time.monotonic()
            try:
                return await fn(*a, **kw)
            finally:
                phases[name] = phases.get(name, 0.0) + time.monotonic() - t
        return wrapper

    def timed(name, fn):
        def wrapper(*a, **kw):
            t = time.monotonic()
            try:
                return fn(*a, **kw)
            finally:
                phases[name] = phases.get(name, 0.0) + time.monotonic() - t
        return wrapper

    import ledger.crawl.frontier as frontier

    # the streamed insert runs the next chunks' scope (levels._guarded) inside it: "of which"
    # phases are nested and not subtracted from the total again
    originals = (frontier.insert_stream, frontier.insert_rows, levels._read_all_links, levels._guarded,
                 levels.plan_next_level)
    frontier.insert_stream = timed_async("frontier insert, streamed (with scope of the next chunks)",
                                         frontier.insert_stream)
    frontier.insert_rows = timed_async("frontier insert, not streamed (budget path, probe chain)", frontier.insert_rows)
    levels._read_all_links = timed_async("read .links.json (S3, old shape only)", levels._read_all_links)
    levels._guarded = timed("  of which scope, guard, URL traps (ledger, overlapped)", levels._guarded)
    levels.plan_next_level = timed("plan (plan_next_level, after the insert)", levels.plan_next_level)
    from ledger.api.crawls import LevelReport

    payload = json.dumps(body).encode()
    t = time.monotonic()
    report = LevelReport.model_validate_json(payload).model_dump(mode="json", exclude_unset=True)
    phases["body validation + dump (pydantic, in the route)"] = time.monotonic() - t
    queries: dict[str, list] = {}
    original_execute = psycopg.AsyncConnection.execute

    async def execute(self, query, params=None, **kw):  # per-statement wall time, keyed by its text
        t = time.monotonic()
        try:
            return await original_execute(self, query, params, **kw)
        finally:
            key = " ".join(str(query).split())[:90]
            entry = queries.setdefault(key, [0, 0.0])
            entry[0] += 1
            entry[1] += time.monotonic() - t

    psycopg.AsyncConnection.execute = execute
    try:
        profiler = Profiler(async_mode="enabled", interval=0.005)
        t0 = time.monotonic()
        with profiler:
            outcome = await levels.record_level(services, uuid.UUID(crawl_id), report)
        phases["total record_level"] = time.monotonic() - t0
        if outcome.status != 200:
            raise RuntimeError(f"in-process level report: {outcome.status} {outcome.answer}")
    finally:
        (frontier.insert_stream, frontier.insert_rows, levels._read_all_links, levels._guarded,
         levels.plan_next_level) = originals
        psycopg.AsyncConnection.execute = original_execute
        await services.close()
    named = sum(v for k, v in phases.items() if not k.startswith(("total", " ")) and "in the route" not in k)
    phases["other (SQL of steps 1, 2, 6, 7, the guard, counters)"] = phases["total record_level"] - named
    top = sorted(queries.items(), key=lambda kv: -kv[1][1])[:6]
    phases["queries"] = {q: {"calls": n, "seconds": round(secs, 3)} for q, (n, secs) in top}
    return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in phases.items()}, _pyinstrument_text(profiler)


def level_progress(ctx: Context) -> None:
    """The level's 2,000 progress events (1,000 ``started``, 1,000 ``done`` with 100 links) over
    HTTP through ``f/waggle/progress.py`` posters, one request per event (a ledger before
    batches) and batched, each on a fresh copy of a crawl of 11,000 pages: ledger and Postgres
    CPU per event, requests, ``done`` latency. No target (issue 14: the cost the level carries)."""
    n_results, links_per, depth, pages = (200 if ctx.quick else 1000), 100, 3, 11_000
    with infra.postgres() as pg, infra.s3() as s3_server, infra.fga(pg) as store, infra.webhook() as hook:
        store.write(writes=[f"user:{SUBJECT} submitter organization:{ORG}"])
        template = pg.new_db()
        _migrate(template)
        crawl_id, pending_urls = _load_crawl(template, pages=pages, pending=n_results, depth=depth)
        task_ids = [str(uuid.uuid4()) for _ in pending_urls]
        links = _links_of(crawl_id, pending_urls, pages, n_results, links_per, depth)
        for label, batches in (("one request per event", False), ("batched", True)):
            db = pg.new_db(template=pg.db_name(template))
            env = infra.ledger_env(db, store, s3_server, hook, WAGGLE_DRAIN_INTERVAL_S="3600",
                                   WAGGLE_RECONCILE_INTERVAL_S="3600", WAGGLE_WATCHDOG_INTERVAL_S="3600")
            with infra.ledger(env) as led:
                load = os.getloadavg()[0]
                out = _send_progress(led.url, crawl_id, pending_urls, task_ids, links, _postmaster(db), led.proc.pid,
                                     batches=batches)
            early = _count(db, "SELECT count(*) FROM crawl_pages WHERE from_progress")
            ctx.detail(label, {**out, "load": round(load, 2), "rows_landed": early})
            events = 2 * n_results
            ctx.metric(f"{label}: ledger CPU per event", out["ledger_cpu_s"] * 1000 / events, "ms",
                       note=f"{out['requests']} requests for {events} events; load {load:.1f}")
            ctx.metric(f"{label}: Postgres CPU per event", out["postgres_cpu_s"] * 1000 / events, "ms",
                       note=f"{early:,} rows landed")
            ctx.metric(f"{label}: done latency p50 / p99", out["done_p50_s"] * 1000, "ms",
                       note=f"p99 {out['done_p99_s'] * 1000:.0f} ms (queued → answered)")


# -- signing ---------------------------------------------------------------------------------


async def _load(url: str, paths: list[str], headers: dict, *, concurrency: int, duration_s: float) -> dict:
    """Fixed-concurrency closed-loop load for ``duration_s``; returns latencies and counts."""
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    stop_at = time.monotonic() + duration_s
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, headers=headers, limits=limits, timeout=30) as client:
        async def worker(w: int) -> None:
            i = w
            while time.monotonic() < stop_at:
                path = paths[i % len(paths)]
                i += concurrency
                t = time.monotonic()
                r = await client.post(path)
                latencies.append(time.monotonic() - t)
                statuses[r.status_code] = statuses.get(r.status_code, 0) + 1

        t0 = time.monotonic()
        await asyncio.gather(*(worker(w) for w in range(concurrency)))
        wall = time.monotonic() - t0
    return {"latencies": latencies, "statuses": statuses, "wall": wall}


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) used so far by process ``pid`` (Linux ``/proc``)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _tree_cpu_s(pid: int) -> float:
    """CPU seconds of ``pid`` and its live descendants (``waggle serve --workers``: the workers)."""
    import psutil

    procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    return sum(_cpu_s(p.pid) for p in procs if p.is_running())


def _workers(pid: int) -> list[int]:
    import psutil

    return [p.pid for p in psutil.Process(pid).children(recursive=True)
            if "multiprocessing" not in " ".join(p.cmdline()) or "spawn_main" in " ".join(p.cmdline())]


def signing(ctx: Context) -> None:
    """``POST /api/archives/:id/url`` under load, 2 ledger workers: ≥ 300 req/s, p99 ≤ 50 ms."""
    n_archives = 1000
    concurrency = 8
    workers = 2  # issue 12: `waggle serve --workers 2`
    duration = 5.0 if ctx.quick else 15.0
    ctx.size = f"{duration:g} s closed loop, {concurrency} concurrent, {workers} ledger workers"
    ctx.detail("load", {"archives": n_archives, "concurrency": concurrency, "duration_s": duration,
                        "generator": "httpx.AsyncClient, closed loop, keep-alive, same machine"})
    with infra.postgres() as pg, infra.s3() as s3_server, infra.fga(pg) as store:
        db = pg.new_db()
        _migrate(db)
        ids: list[str] = []
        writes: list[str] = [f"user:{SUBJECT} submitter organization:{ORG}"]
        with psycopg.connect(db) as conn:
            for i in range(n_archives):
                task = str(uuid.uuid4())
                row = conn.execute(
                    "INSERT INTO archives (task_id, bucket, object_key, source_url, captured_at)"
                    " VALUES (%s, 'browserhive', %s, %s, now()) RETURNING id",
                    (task, f"{task}_c.wacz", f"{_site(i % HOSTS)}/p{i}"),
                ).fetchone()
                ids.append(str(row[0]))
                writes += [f"capture_job:{task} parent archive:{row[0]}",
                           f"organization:{ORG} parent capture_job:{task}"]
            # indexed for search already, as archives admitted earlier are: else the ledger's search
            # sweep reads 1,000 missing WACZs from S3 during the measurement (≈ 2.4 ms of ledger CPU
            # and 1.6 ms of the S3 stand-in's per request measured), which is not the route's cost
            conn.execute("UPDATE archives SET indexed_at = now()")
            conn.commit()
            postmaster = _postmaster(db)
        for i in range(0, len(writes), 100):
            store.write(writes=writes[i:i + 100])
        env = infra.ledger_env(db, store, s3_server, None, WAGGLE_DRAIN_INTERVAL_S="3600",
                               WAGGLE_RECONCILE_INTERVAL_S="3600", WAGGLE_WATCHDOG_INTERVAL_S="3600")
        with infra.ledger(env, workers=workers, timeout_s=240) as led:  # two workers start slowly under load
            probe = httpx.post(f"{led.url}/api/archives/{ids[0]}/url", headers=infra.who(), timeout=10)
            if probe.status_code == 404 and probe.json().get("error") != "not found":
                raise RuntimeError(f"signing route not served yet: {probe.status_code} {probe.text[:200]}")
            if probe.status_code != 200:
                raise RuntimeError(f"signing route answered {probe.status_code}: {probe.text[:300]}")
            paths = [f"/api/archives/{i}/url" for i in ids]
            asyncio.run(_load(led.url, paths[:50], infra.who(), concurrency=concurrency, duration_s=2.0))  # warm-up
            def cpu_now() -> dict[str, float]:
                return {"ledger": _tree_cpu_s(led.proc.pid), "openfga": _cpu_s(store.pid),
                        "postgres": _pg_cpu(postmaster), "generator": time.process_time()}

            cpu0 = cpu_now()
            out = asyncio.run(_load(led.url, paths, infra.who(), concurrency=concurrency, duration_s=duration))
            # CPU per request barely depends on what else the shared machine runs (throughput does);
            # the load generator shares the 2 cores with the parts it measures, so its own is shown too
            n = max(1, len(out["latencies"]))
            cpu_ms = {k: round((v - cpu0[k]) * 1000 / n, 3) for k, v in cpu_now().items()}
            ctx.detail("cpu_ms_per_request", cpu_ms)
            ctx.detail("ledger_workers", workers)
            # where the time goes: py-spy on one ledger worker under the same load (OpenFGA is a Go
            # program: py-spy cannot sample it; its CPU per request is above)
            spied = (_workers(led.proc.pid) or [led.proc.pid])[-1]
            with tempfile.TemporaryDirectory() as tmp:
                spies = {name: (infra.py_spy(pid, 8, Path(tmp) / f"{name}.txt"), Path(tmp) / f"{name}.txt")
                         for name, pid in (("ledger", spied),)}
                asyncio.run(_load(led.url, paths, infra.who(), concurrency=concurrency, duration_s=10.0))
                for name, (spy, path) in spies.items():
                    spy.wait(30)
                    key = f"py_spy_{name}"
                    if path.exists():
                        ctx.detail(key, infra.hot_functions(path))
                    else:
                        ctx.detail(key, f"py-spy failed: {(spy.stderr.read() if spy.stderr else '')[:300]}")
    lat = out["latencies"]
    ok = out["statuses"].get(200, 0)
    ctx.detail("statuses", out["statuses"])
    ctx.detail("latency_ms", {k: (v * 1000 if isinstance(v, float) else v) for k, v in summary(lat).items()})
    if ok != len(lat):
        raise RuntimeError(f"not every signing request succeeded: {out['statuses']}")
    ctx.metric("signing throughput", ok / out["wall"], "req/s", 300, ">=",
               f"concurrency {concurrency}, {workers} ledger workers", key="requests_per_s")
    ctx.metric("signing p99 latency", percentile(lat, 99) * 1000, "ms", 50, "<=", key="p99_ms")
    ctx.metric("signing median latency", percentile(lat, 50) * 1000, "ms", key="median_ms")
    ctx.metric("ledger CPU per request (all workers)", cpu_ms["ledger"], "ms", key="ledger_cpu_ms_per_request")
    ctx.metric("OpenFGA CPU per request", cpu_ms["openfga"], "ms", key="openfga_cpu_ms_per_request")
    ctx.metric("Postgres CPU per request (ledger's and OpenFGA's queries)", cpu_ms["postgres"], "ms",
               key="postgres_cpu_ms_per_request")
    ctx.metric("load generator CPU per request (httpx, same machine)", cpu_ms["generator"], "ms",
               key="generator_cpu_ms_per_request")
    total = sum(cpu_ms.values())
    ctx.metric("  all of it: 2 cores / CPU per request", 2000 / total if total else None, "req/s",
               note=f"{total:.2f} ms of CPU per request on this machine, load generator included")


# -- outbox ----------------------------------------------------------------------------------


def outbox(ctx: Context) -> None:
    """Deliver queued tuples to the real OpenFGA server (datastore postgres) with ``drain_all``: ≥ 1,000 tuples/s."""
    rows = 1000 if ctx.quick else 7000  # 3 tuples per row
    ctx.size = f"{rows:,} rows × 3 tuples"
    with infra.postgres() as pg, infra.fga(pg) as store:
        db = pg.new_db()
        _migrate(db)
        from ledger.archive.admission import archive_tuples

        with psycopg.connect(db) as conn:
            with conn.cursor().copy("COPY fga_outbox (payload) FROM STDIN") as copy:
                for i in range(rows):
                    payload = {"writes": archive_tuples(str(uuid.uuid4()), str(uuid.uuid4()), ORG, SUBJECT)}
                    copy.write_row([json.dumps(payload)])
            conn.commit()
        stats = asyncio.run(_drain(db, store, 30.0 if ctx.quick else 60.0))
        with psycopg.connect(db) as conn:
            done = conn.execute("SELECT count(*) FROM fga_outbox WHERE processed_at IS NOT NULL").fetchone()[0]
        tuples_in_store = len(store.read()) if done <= 3000 else None
    ctx.detail("rows", rows)
    ctx.detail("drain", stats)
    if done != stats["delivered"] or stats["failed"]:
        raise RuntimeError(f"{done} rows marked processed, {stats['delivered']} delivered: {stats}")
    if tuples_in_store is not None and tuples_in_store != done * 3:
        raise RuntimeError(f"OpenFGA holds {tuples_in_store} tuples, expected {done * 3}")
    ctx.metric("outbox delivery", stats["delivered"] * 3 / stats["seconds"], "tuples/s", 1000, ">=",
               f"{stats['delivered']:,} of {rows:,} rows × 3 tuples in {stats['seconds']:.0f} s"
               + ("" if stats["finished"] else " (time budget)"), key="tuples_per_s")
    ctx.metric("  outbox rows/s, first 10 s", stats["rows_per_s_first_10s"], "rows/s")
    ctx.metric("  outbox rows/s, overall", stats["rows_per_s_overall"], "rows/s",
               note="falls as the store grows (see README)")


async def _drain(db: str, store, budget_s: float = 120.0) -> dict:
    from ledger.authz.fga import Authz
    from ledger.authz.outbox import drain_all
    from ledger.db.pool import open_pool

    pool = await open_pool(db, max_size=4)
    authz = Authz(store.api_url, store.store_id, store.model_id)
    try:
        delivered = failed = 0
        t0 = time.monotonic()
        windows: list[tuple[float, int]] = []  # (seconds since start, delivered so far) after each batch
        while time.monotonic() - t0 < budget_s:
            r = await drain_all(pool, authz, max_batches=1)
            delivered += r.delivered
            failed += r.failed
            windows.append((time.monotonic() - t0, delivered))
            if r.unreachable:
                raise RuntimeError(f"OpenFGA unreachable: {r.unreachable}")
            if r.batch == 0 or r.delivered == 0:
                break
        secs = time.monotonic() - t0
    finally:
        await pool.close()
        closer = getattr(authz, "close", None)
        if closer:
            res = closer()
            if hasattr(res, "__await__"):
                await res
    first = next(((t, n) for t, n in windows if t >= 10), windows[-1] if windows else (secs, delivered))
    return {"delivered": delivered, "failed": failed, "seconds": round(secs, 3), "finished": time.monotonic() - t0 < budget_s,
            "rows_per_s_first_10s": round(first[1] / first[0], 1) if first[0] else None,
            "rows_per_s_overall": round(delivered / secs, 1) if secs else None,
            "batches": [(round(t, 2), n) for t, n in windows]}


# -- reconciler ------------------------------------------------------------------------------


def reconciler(ctx: Context) -> None:
    """Reconcile 100,000 pending submissions (manifests in S3) for a bounded time; report the rate."""
    n = 10_000 if ctx.quick else 100_000
    with_manifest = 1000 if ctx.quick else 6000  # uploading 100,000 objects to s3rver alone takes ~20 min here
    budget_s = 30.0 if ctx.quick else 150.0
    with infra.postgres() as pg, infra.s3() as s3_server:
        db = pg.new_db()
        _migrate(db)
        crawl = str(uuid.uuid4())
        tasks = sorted((uuid.uuid4() for _ in range(n)))  # the reconciler's order (same submitted_at)
        with psycopg.connect(db) as conn:
            with conn.cursor().copy(
                "COPY capture_submissions (task_id, correlation_id, org_id, submitted_by, manifest_key, submitted_at)"
                " FROM STDIN"
            ) as copy:
                for t in tasks:
                    copy.write_row([str(t), crawl, ORG, SUBJECT, f"{t}_{crawl}.result.json", "2026-11-29T12:00:00Z"])
            conn.commit()
            conn.execute("ANALYZE capture_submissions")
            conn.commit()
        t0 = time.monotonic()
        _put_all(s3_server, {f"{t}_{crawl}.result.json": json.dumps(
            _manifest(str(t), crawl, f"{_site(i % HOSTS)}/p{i}")).encode()
            for i, t in enumerate(tasks[:with_manifest])}, workers=16)
        ctx.detail("s3_upload_s", round(time.monotonic() - t0, 2))
        out = asyncio.run(_reconcile(db, s3_server, budget_s))
        with psycopg.connect(db) as conn:
            registered = conn.execute("SELECT count(*) FROM archives").fetchone()[0]
            outbox_rows = conn.execute("SELECT count(*) FROM fga_outbox").fetchone()[0]
    ctx.detail("pending", n)
    ctx.detail("with_manifest", with_manifest)
    ctx.detail("run", out)
    ctx.detail("registered", registered)
    ctx.detail("outbox_rows", outbox_rows)
    looked = out["looked_at"]
    secs = out["seconds"]
    from ledger.archive.admission import READ_CONCURRENCY
    from ledger.archive.reconciler import CHUNK

    # up to one chunk may be read but not yet admitted when the time budget cuts the pass
    if not 0 <= min(looked, with_manifest) - registered <= CHUNK or outbox_rows != registered:
        raise RuntimeError(f"registered {registered}, outbox {outbox_rows}, looked at {looked}: {out}")
    rate = looked / secs
    ctx.metric("reconciler: pending query", out["pending_query_s"], "s", note=f"{n:,} pending rows")
    ctx.metric("reconciler rate", rate, "submissions/s", key="submissions_per_s",
               note=f"{looked:,} looked at in {secs:.0f} s ({registered:,} registered, rest missing in S3)")
    ctx.metric("reconciler: projected pass over all", out["pending_query_s"] + n / rate, "s",
               note=f"{n:,} pending at the measured rate")
    ctx.metric("  per submission: manifest read wall time", out["s3_s"] / looked * 1000, "ms",
               note=f"chunk wall / chunk size, ≤ {READ_CONCURRENCY} GETs in flight")
    ctx.metric("  per registered archive: batched admission", out["admit_s"] / max(1, registered) * 1000, "ms",
               note=f"one transaction per {CHUNK} rows")
    ctx.metric("  reconciler CPU per submission looked at", out["reconciler_cpu_s"] / looked * 1000, "ms",
               note=f"{out['reconciler_cpu_s']:.1f} s in this process (the S3 client's included)")
    ctx.metric("  Postgres CPU per submission looked at", out["postgres_cpu_s"] / looked * 1000, "ms",
               note=f"{out['postgres_cpu_s']:.1f} s")


async def _reconcile(db: str, s3_server, budget_s: float) -> dict:
    """Run one reconcile pass for at most ``budget_s`` s; count rows looked at and where time goes."""
    import ledger.archive.reconciler as rec
    from ledger.db.pool import open_pool
    from ledger.s3 import S3Store

    pool = await open_pool(db, max_size=4)
    s3 = S3Store(s3_server.endpoint, s3_server.bucket, access_key_id=s3_server.access_key_id,
                 secret_access_key=s3_server.secret_access_key)
    stats = {"looked_at": 0, "s3_s": 0.0, "admit_s": 0.0}
    fetch, admit = rec.fetch_manifests, rec.admit_many

    async def counted_fetch(s3, keys, *a, **kw):  # one chunk's manifests, read concurrently
        t = time.monotonic()
        try:
            return await fetch(s3, keys, *a, **kw)
        finally:
            stats["looked_at"] += len(keys)
            stats["s3_s"] += time.monotonic() - t

    async def timed_admit(*a, **kw):
        t = time.monotonic()
        try:
            return await admit(*a, **kw)
        finally:
            stats["admit_s"] += time.monotonic() - t

    rec.fetch_manifests, rec.admit_many = counted_fetch, timed_admit
    try:
        t = time.monotonic()
        async with pool.connection() as conn:
            await (await conn.execute(rec.PENDING_SQL, {"since_days": None})).fetchall()
        stats["pending_query_s"] = time.monotonic() - t
        postmaster = _postmaster(db)
        # CPU seconds (a loaded machine stretches wall time, not these): the reconciler runs in
        # this process (its S3 client too), Postgres in its own
        t0, c0, p0 = time.monotonic(), time.process_time(), _pg_cpu(postmaster)
        try:
            await asyncio.wait_for(rec.reconcile(pool, s3), budget_s)
            stats["finished"] = True
        except asyncio.TimeoutError:
            stats["finished"] = False
        stats["seconds"] = time.monotonic() - t0
        stats["reconciler_cpu_s"] = time.process_time() - c0
        stats["postgres_cpu_s"] = _pg_cpu(postmaster) - p0
    finally:
        rec.fetch_manifests, rec.admit_many = fetch, admit
        await pool.close()
    return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in stats.items()}


BENCHMARKS = {
    "level-report": level_report,
    "signing": signing,
    "outbox": outbox,
    "reconciler": reconciler,
}


# -- level report scale curve -----------------------------------------------------------------


def level_report_curve(ctx: Context) -> None:
    """The v2 level report in-process (``record_level``, no HTTP, no admission) at 10k / 100k /
    1M pages held × 10k / 100k links (100 links per result): how the cost grows."""
    sizes = [10_000, 100_000] if ctx.quick else [10_000, 100_000, 1_000_000]
    links_per, depth = 100, 3
    with infra.postgres() as pg, infra.s3() as s3_server, infra.fga(pg) as store, infra.webhook() as hook:
        for pages in sizes:
            template = pg.new_db()
            _migrate(template)
            crawl_id, pending_urls = _load_crawl(template, pages=pages, pending=1000, depth=depth)
            for n_results in (100, 1000):
                urls = pending_urls[:n_results]
                tasks = [str(uuid.uuid4()) for _ in urls]
                links = _links_of(crawl_id, urls, pages, 1000, links_per, depth)
                body = _report_body(crawl_id, depth, urls, tasks, links)
                db = pg.new_db(template=pg.db_name(template))
                with psycopg.connect(db, autocommit=True) as conn:
                    conn.execute("CHECKPOINT")
                env = infra.ledger_env(db, store, s3_server, hook)
                secs, phases = asyncio.run(_timed_level(db, env, crawl_id, body))
                ctx.detail(f"{pages} pages, {n_results * links_per} links", phases)
                ctx.metric(f"{pages:,} pages held, {n_results * links_per:,} links", secs, "s",
                           note=f"insert {phases['insert']:.2f} s, validation {phases['validation']:.2f} s")


async def _timed_level(db_url: str, env: dict[str, str], crawl_id: str, body: dict) -> tuple[float, dict]:
    """Validate ``body`` as the route does and apply it with ``record_level``; (seconds, phases)."""
    import ledger.crawl.levels as levels
    from ledger.api.crawls import LevelReport
    from ledger.crawl.report_limits import check_counts
    from ledger.services import build_services
    from ledger.settings import Settings

    settings = Settings(_env_file=None, **{k[len("WAGGLE_"):].lower(): v for k, v in env.items()
                                           if k.startswith("WAGGLE_")})
    settings.database_url = db_url
    services = await build_services(settings)
    import ledger.crawl.frontier as frontier

    phases = {"insert": 0.0}
    insert, stream = frontier.insert_rows, frontier.insert_stream

    def timing(fn):
        async def timed_insert(*a, **kw):
            t = time.monotonic()
            try:
                return await fn(*a, **kw)
            finally:
                phases["insert"] += time.monotonic() - t
        return timed_insert

    # the streamed insert includes the scope of the chunks after the first (overlapped)
    frontier.insert_rows, frontier.insert_stream = timing(insert), timing(stream)
    try:
        payload = json.dumps(body).encode()
        t0 = time.monotonic()
        parsed = LevelReport.model_validate_json(payload)
        check_counts(parsed.results, settings)
        report = parsed.model_dump(mode="json", exclude_unset=True)
        phases["validation"] = time.monotonic() - t0
        outcome = await levels.record_level(services, uuid.UUID(crawl_id), report)
        secs = time.monotonic() - t0
        if outcome.status != 200:
            raise RuntimeError(f"in-process level report: {outcome.status} {outcome.answer}")
    finally:
        frontier.insert_rows, frontier.insert_stream = insert, stream
        await services.close()
    return secs, {k: round(v, 3) for k, v in phases.items()}


BENCHMARKS["level-report-curve"] = level_report_curve


# -- level report: the streamed insert's overlap (issue 14, third round) ----------------------


def level_report_overlap(ctx: Context) -> None:
    """The v2 level report (1,000 results, 100,000 links, 1,000,000 pages held) in-process as the
    route runs it (body parse, validation, dump, ``record_level``, answer), alternating chunk sizes
    of the streamed frontier insert (``levels.STREAM_CHUNK_LINKS``; "whole" = one chunk = no
    overlap), each on a fresh copy after a CHECKPOINT. Per run: wall, the ledger's CPU and all
    Postgres processes' CPU, split into inside and outside the streamed insert. On a loaded
    machine wall time is mostly waiting for a core; the critical path on 2 idle cores is
    estimated as CPU outside the stream (ledger + Postgres) + max(ledger, Postgres) inside it."""
    pages = 100_000 if ctx.quick else 1_000_000
    n_results, links_per, depth = 1000, 100, 3
    variants = [("whole", 10 ** 9), ("10,000", 10_000), ("5,000", 5_000)]
    rounds = 1 if ctx.quick else 2
    with infra.postgres() as pg, infra.s3() as s3_server, infra.fga(pg) as store, infra.webhook() as hook:
        template = pg.new_db()
        _migrate(template)
        crawl_id, pending_urls = _load_crawl(template, pages=pages, pending=n_results, depth=depth)
        tasks = [str(uuid.uuid4()) for _ in pending_urls]
        body = _report_body(crawl_id, depth, pending_urls, tasks,
                            _links_of(crawl_id, pending_urls, pages, n_results, links_per, depth))
        payload = json.dumps(body).encode()
        runs: dict[str, list[dict]] = {}
        for r in range(rounds):
            for label, size in variants:
                db = pg.new_db(template=pg.db_name(template))
                with psycopg.connect(db, autocommit=True) as conn:
                    conn.execute("CHECKPOINT")
                env = infra.ledger_env(db, store, s3_server, hook)
                load = os.getloadavg()[0]
                out = asyncio.run(_overlap_run(db, env, crawl_id, payload, size))
                out["load"] = round(load, 2)
                runs.setdefault(label, []).append(out)
                ctx.detail(f"{label} #{r + 1}", out)
        for label, _ in variants:
            best = min(runs[label], key=lambda o: o["estimate_2_idle_cores_s"])
            ctx.metric(f"chunks of {label}: estimated round trip on 2 idle cores", best["estimate_2_idle_cores_s"], "s",
                       2.0, "<=", f"ledger {best['ledger_cpu_s']} s + Postgres {best['postgres_cpu_s']} s CPU;"
                                  f" in the stream {best['stream_ledger_cpu_s']} / {best['stream_postgres_cpu_s']} s")
            for o in runs[label]:
                ctx.metric(f"  wall (load {o['load']})", o["wall_s"], "s",
                           note=f"stream wall {o['stream_wall_s']} s")


def _pg_cpu(root_pid: int) -> float:
    """CPU seconds of a postmaster and its live children (backends, WAL writer, checkpointer)."""
    import psutil

    total = 0.0
    for p in [psutil.Process(root_pid), *psutil.Process(root_pid).children()]:
        try:
            total += _cpu_s(p.pid)
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total


async def _overlap_run(db_url: str, env: dict[str, str], crawl_id: str, payload: bytes, chunk: int) -> dict:
    import psutil

    import ledger.crawl.frontier as frontier
    import ledger.crawl.levels as levels
    from ledger.api.crawls import LevelReport
    from ledger.crawl.report_limits import check_counts
    from ledger.services import build_services
    from ledger.settings import Settings

    settings = Settings(_env_file=None, **{k[len("WAGGLE_"):].lower(): v for k, v in env.items()
                                           if k.startswith("WAGGLE_")})
    settings.database_url = db_url
    services = await build_services(settings)
    async with services.pool.connection() as conn:
        backend = (await (await conn.execute("SELECT pg_backend_pid() AS p")).fetchone())["p"]
    postmaster = psutil.Process(backend).ppid()
    stream = {"ledger": 0.0, "pg": 0.0, "wall": 0.0}
    real = frontier.insert_stream

    async def timed(*a, **kw):
        c, p, w = time.process_time(), _pg_cpu(postmaster), time.monotonic()
        try:
            return await real(*a, **kw)
        finally:
            stream["ledger"] += time.process_time() - c
            stream["pg"] += _pg_cpu(postmaster) - p
            stream["wall"] += time.monotonic() - w

    frontier.insert_stream, size = timed, levels.STREAM_CHUNK_LINKS
    levels.STREAM_CHUNK_LINKS = chunk
    try:
        c0, p0, t0 = time.process_time(), _pg_cpu(postmaster), time.monotonic()
        parsed = LevelReport.model_validate(json.loads(payload))  # as FastAPI does it
        check_counts(parsed.results, settings)
        report = parsed.model_dump(mode="json", exclude_unset=True)
        outcome = await levels.record_level(services, uuid.UUID(crawl_id), report)
        answer = outcome.body or orjson_dumps(outcome.answer)
        wall = time.monotonic() - t0
        ledger_cpu, pg_cpu = time.process_time() - c0, _pg_cpu(postmaster) - p0
        if outcome.status != 200 or not answer:
            raise RuntimeError(f"in-process level report: {outcome.status} {outcome.answer}")
    finally:
        frontier.insert_stream, levels.STREAM_CHUNK_LINKS = real, size
        await services.close()
    outside = (ledger_cpu - stream["ledger"]) + (pg_cpu - stream["pg"])
    return {"wall_s": round(wall, 3), "ledger_cpu_s": round(ledger_cpu, 3), "postgres_cpu_s": round(pg_cpu, 3),
            "stream_wall_s": round(stream["wall"], 3), "stream_ledger_cpu_s": round(stream["ledger"], 3),
            "stream_postgres_cpu_s": round(stream["pg"], 3), "next": len(outcome.answer["next"]),
            "estimate_2_idle_cores_s": round(outside + (max(stream["ledger"], stream["pg"]) if chunk < 10 ** 9
                                                        else stream["ledger"] + stream["pg"]), 3)}


def orjson_dumps(value: object) -> bytes:
    import orjson

    return orjson.dumps(value)


BENCHMARKS["level-report-overlap"] = level_report_overlap
