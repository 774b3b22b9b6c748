"""``crawl-collection`` (issue 25 item 6): a crawl of 10,000 archives (ledger rows plus small real
WACZ objects in the local S3 stand-in) as one collection and one file.

* ``GET /api/crawls/{id}/collection`` p50 / p95 for a caller who may view every archive (alice:
  owner of every capture job) and one who may view half (bob: a member of the organization,
  which is a viewer of every other archive) — target p95 ≤ 300 ms. Members are ledger paths (no
  signing per answer); a finished crawl's members and a caller's decisions are reused for
  ``WAGGLE_COLLECTION_CACHE_S`` (decision 371), so each caller's run holds its first answer
  (alice's decisions were already asked while the sizes were measured; bob's were not), and a
  **cold** answer per caller (nothing reused: timed after the reuse window) is reported apart.
  Sizes and hashes are measured by the first answer (reported). A member read (the path's 302 to
  a freshly signed URL, one Check) is timed too.
* The combined WACZ's build (``POST /api/crawls/{id}/download`` → 202 … 200) against a plain copy
  of the same members (S3 → one local file on the same disk → S3, one streamed GET after another;
  timed before and after the build, the mean used): throughput ratio, target ≥ 0.5.
* Peak RSS of the ledger process while building, for 1/10 of the members and for all of them
  (flat in the number of pages: the two peaks should be close).
"""

from __future__ import annotations

import statistics
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import psycopg

from tests.bench import infra
from tests.bench.harness import Context, percentile

ORG, ALICE, BOB = "acme", "alice", "bob"
REQUESTS = 20  # per caller
CACHE_S = 30  # the ledger's WAGGLE_COLLECTION_CACHE_S (its default), waited out for a cold answer


def _wacz(url: str, tmp: Path) -> bytes:
    from waggle_capture.warc import cdxj_index
    from waggle_capture.wacz import build_wacz, pages_jsonl
    from tests.archive.helpers import warc_gz

    body = f"<!doctype html><title>{url}</title><h1>{url}</h1>".encode() + b"x" * 2000
    warc = tmp / "data.warc.gz"
    warc.write_bytes(warc_gz(url, body))
    out = tmp / "p.wacz"
    build_wacz(out, warc=warc, cdxj=cdxj_index(warc), pages=pages_jsonl(str(uuid.uuid4()), url, "2026-12-01T04:00:00Z", url),
               extra=[], datapackage={"title": url})
    return out.read_bytes()


def _load(db_url: str, s3_server, store, crawl_id: str, n: int) -> list[tuple[str, str]]:
    """``n`` captured pages of ``crawl_id`` with their archives and WACZ objects → [(archive id, key)]."""
    urls = [f"http://bench-collection.example/p{i}" for i in range(n)]
    with tempfile.TemporaryDirectory() as tmp:
        objects = [_wacz(u, Path(tmp)) for u in urls]
    keys = [f"{uuid.uuid4()}_{crawl_id}.wacz" for _ in urls]
    client = s3_server.client()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda kv: client.put_object(Bucket=s3_server.bucket, Key=kv[0], Body=kv[1]), zip(keys, objects)))
    tasks = [str(uuid.uuid4()) for _ in urls]
    with psycopg.connect(db_url) as conn:
        with conn.cursor().copy("COPY crawl_pages (crawl_id, url, url_key, depth, host, state, task_id) FROM STDIN") as copy:
            for i, (u, t) in enumerate(zip(urls, tasks)):
                copy.write_row((crawl_id, u, u, 0 if i == 0 else 1, "bench-collection.example", "captured", t))
        ids = []
        with conn.cursor().copy("COPY archives (id, task_id, correlation_id, bucket, object_key, source_url, captured_at,"
                                " wacz_complete) FROM STDIN") as copy:
            for u, t, k in zip(urls, tasks, keys):
                aid = str(uuid.uuid4())
                ids.append(aid)
                copy.write_row((aid, t, crawl_id, s3_server.bucket, k, u, "2026-12-01T04:00:00Z", True))
        conn.commit()
        conn.execute("ANALYZE crawl_pages")
        conn.execute("ANALYZE archives")
        conn.commit()
    writes = []
    for i, (aid, t) in enumerate(zip(ids, tasks)):
        writes += [f"capture_job:{t} parent archive:{aid}", f"user:{ALICE} owner capture_job:{t}"]
        if i % 2 == 0:
            writes.append(f"organization:{ORG}#member viewer archive:{aid}")
    for i in range(0, len(writes), 100):
        store.write(writes=writes[i:i + 100])
    return list(zip(ids, keys))


def _timed_gets(url: str, headers: dict, count: int) -> tuple[list[float], dict]:
    times, body = [], {}
    with httpx.Client(timeout=600) as client:
        for _ in range(count):
            t0 = time.perf_counter()
            r = client.get(url, headers=headers)
            times.append((time.perf_counter() - t0) * 1000)
            r.raise_for_status()
            body = r.json()
    return times, body


def _timed_reads(base: str, members: list[dict], headers: dict) -> tuple[list[float], int]:
    """Each member's path read once (not followed): → (ms per read, how many answered 302)."""
    times, redirects = [], 0
    with httpx.Client(base_url=base, timeout=60) as client:
        for m in members:
            t0 = time.perf_counter()
            r = client.get(m["path"], headers=headers)
            times.append((time.perf_counter() - t0) * 1000)
            redirects += r.status_code == 302
    return times, redirects


def _peak_rss_during(pid: int, action) -> tuple[float, int, int]:
    """Run ``action()``; → (seconds it took, RSS before, peak RSS during) of process ``pid`` in bytes."""
    import psutil

    proc = psutil.Process(pid)
    base = proc.memory_info().rss
    peak = [base]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], proc.memory_info().rss)
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    t0 = time.monotonic()
    try:
        action()
    finally:
        elapsed = time.monotonic() - t0
        stop.set()
        sampler.join()
    return elapsed, base, peak[0]


def _download(url: str, headers: dict) -> dict:
    with httpx.Client(timeout=120) as client:
        while True:
            r = client.post(url, headers=headers)
            if r.status_code == 200:
                return r.json()
            if r.status_code != 202:
                raise RuntimeError(f"download answered {r.status_code}: {r.text[:300]}")
            time.sleep(float(r.json().get("retryAfterS") or 2))  # as a client is told


def _plain_copy(s3_server, keys: list[str]) -> tuple[float, int]:
    """S3 → one local file → S3, member after member: the same bytes, no zip or index work."""
    client = s3_server.client()
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="waggle-bench-copy-") as tmp:
        out = Path(tmp) / "copy.bin"
        with out.open("wb") as dst:
            for k in keys:  # one streamed GET per member, as the build reads them
                body = client.get_object(Bucket=s3_server.bucket, Key=k)["Body"]
                while block := body.read(1024 * 1024):
                    dst.write(block)
                body.close()
        size = out.stat().st_size
        client.upload_file(str(out), s3_server.bucket, f"bench-copy/{uuid.uuid4()}.bin")
    return time.monotonic() - t0, size


def crawl_collection(ctx: Context) -> None:
    """The collection answer and the combined file at 10,000 archives (1,000 with --quick)."""
    n = 1000 if ctx.quick else 10_000
    ctx.size = f"{n:,} archives"
    small = n // 10
    ctx.detail("archives", n)
    ctx.detail("machine", "shared 2-core machine: other engineers' work runs alongside (see load)")
    with infra.postgres() as pg, infra.s3() as s3_server, infra.fga(pg) as store, infra.webhook() as hook:
        db = pg.new_db()
        from ledger.db.migrate import migrate

        migrate(db)
        store.write(writes=[f"user:{ALICE} submitter organization:{ORG}", f"user:{BOB} submitter organization:{ORG}"])
        crawls = {}
        with psycopg.connect(db) as conn:
            for size in (small, n):
                cid = str(uuid.uuid4())
                conn.execute(
                    "INSERT INTO crawls (id, seeds, scope, max_depth, max_pages, per_host_delay_ms, host_parallelism,"
                    " org_id, requested_by, current_depth, pages_discovered, state, finished_at)"
                    " VALUES (%s, %s, 'same-origin', 1, %s, 2000, 4, %s, %s, 1, %s, 'succeeded', now())",
                    (cid, ["http://bench-collection.example/p0"], size, ORG, ALICE, size))
                crawls[size] = cid
            conn.commit()
        t0 = time.monotonic()
        members = {size: _load(db, s3_server, store, cid, size) for size, cid in crawls.items()}
        ctx.detail("load_s", round(time.monotonic() - t0, 1))
        # the background loops are off: the build is measured alone (py-spy of the ledger during
        # the build found the search sweep indexing the loaded archives — langid — in a third of it)
        env = infra.ledger_env(db, store, s3_server, hook, WAGGLE_DRAIN_INTERVAL_S="3600",
                               WAGGLE_RECONCILE_INTERVAL_S="3600", WAGGLE_WATCHDOG_INTERVAL_S="3600",
                               WAGGLE_SEARCH_SWEEP_INTERVAL_S="3600")
        with infra.ledger(env) as led:
            url = f"{led.url}/api/crawls/{crawls[n]}/collection"
            first, body = _timed_gets(url, infra.who(ALICE, ORG), 1)
            ctx.metric("first answer (measures ≤ 200 members, starts the rest in the background)", round(first[0]), "ms")
            t0 = time.monotonic()
            while not all(m["hash"] for m in body["resources"]):  # the background measuring ends
                time.sleep(2)
                _, body = _timed_gets(url, infra.who(ALICE, ORG), 1)
            ctx.metric(f"all {n:,} members measured (size and SHA-256, read once from S3)",
                       round(time.monotonic() - t0 + first[0] / 1000, 1), "s")
            assert len(body["resources"]) == n
            requests = REQUESTS
            ctx.detail("requests_per_caller", requests)
            p95s: dict[str, float] = {}
            for who, label, expect in ((ALICE, "all", n), (BOB, "half", (n + 1) // 2)):
                times, body = _timed_gets(url, infra.who(who, ORG), requests)
                assert len(body["resources"]) == expect, (who, len(body["resources"]))
                ctx.metric(f"collection answer p50 ({label} of {n:,} viewable)", round(statistics.median(times), 1), "ms")
                ctx.metric(f"collection answer slowest of {requests} ({label} of {n:,} viewable)", round(max(times), 1), "ms")
                p95s[label] = round(percentile(times, 95), 1)
                ctx.metric(f"collection answer p95 ({label} of {n:,} viewable)", p95s[label], "ms", 300, "<=")
            reads, redirected = _timed_reads(led.url, body["resources"][:REQUESTS], infra.who(BOB, ORG))
            assert redirected == len(reads), (redirected, len(reads))
            ctx.metric("member read p95 (302 to a URL signed now, one Check)", round(percentile(reads, 95), 1), "ms")
            colds: dict[str, float] = {}
            for who, label in ((ALICE, "all"), (BOB, "half")):  # nothing reused: past the window
                time.sleep(CACHE_S + 1)
                cold, _ = _timed_gets(url, infra.who(who, ORG), 1)
                colds[label] = round(cold[0], 1)
                ctx.metric(f"cold collection answer ({label} of {n:,} viewable; members read, OpenFGA asked)",
                           colds[label], "ms")
            # a player's first answer is usually cold (nothing kept from the last 30 s): the
            # issue's 300 ms holds it to the same bound as the p95
            cold_worst = max(colds, key=colds.get)
            ctx.metric("cold collection answer, the worse viewer", colds[cold_worst], "ms", 300, "<=",
                       f"viewer of {cold_worst} of {n:,}; nothing reused", key="cold_answer_ms")
            worst = max(p95s, key=p95s.get)
            ctx.metric("collection answer p95, the worse viewer", p95s[worst], "ms", 300, "<=",
                       f"viewer of {worst} of {n:,}", key="answer_p95_ms")
            ctx.detail("answer_bytes_all", len(httpx.get(url, headers=infra.who(ALICE, ORG), timeout=120).content))
            keys = [k for _, k in members[n]]
            copy_before, copy_bytes = _plain_copy(s3_server, keys)  # before and after the build: the
            builds = {}                                           # shared machine's load drifts
            for size, cid in crawls.items():
                if size != n:  # sizes of the small crawl measured before its build
                    small_url = f"{led.url}/api/crawls/{cid}/collection"
                    while not all(m["hash"] for m in _timed_gets(small_url, infra.who(ALICE, ORG), 1)[1]["resources"]):
                        time.sleep(1)
                got: dict = {}
                elapsed, base, peak = _peak_rss_during(
                    led.proc.pid, lambda: got.update(_download(f"{led.url}/api/crawls/{cid}/download", infra.who(ALICE, ORG))))
                builds[size] = (elapsed, base, peak, got)
                ctx.metric(f"peak RSS over baseline while building ({size:,} members)", round((peak - base) / 2**20, 1), "MiB")
            elapsed, _, _, got = builds[n]
            copy_after, _ = _plain_copy(s3_server, keys)
            copy_s = (copy_before + copy_after) / 2
            ctx.detail("build", {"members": n, "seconds": round(elapsed, 2), "file_bytes": got["bytes"],
                                 "member_bytes": copy_bytes})
            ctx.detail("plain_copy", {"seconds_before_build": round(copy_before, 2),
                                      "seconds_after_build": round(copy_after, 2), "bytes": copy_bytes})
            ctx.metric("combined build throughput", round(copy_bytes / elapsed / 2**20, 2), "MiB/s")
            ctx.metric("plain copy throughput (S3 → disk → S3; mean of before and after the build)",
                       round(copy_bytes / copy_s / 2**20, 2), "MiB/s")
            ctx.metric("build throughput / plain copy", round(copy_s / elapsed, 3), "ratio", 0.5, ">=",
                       key="build_throughput_ratio")
