"""Stuck-crawl watchdog against real Postgres and Windmill's job routes over real HTTP."""

from __future__ import annotations

import asyncio
import re
import socket
import time
import uuid

import psycopg
import pytest

from ledger.crawl import watchdog
from tests.guard.helpers import (
    ThreadServer,
    WindmillJobs,
    close_services,
    completed,
    crawl_row,
    insert_crawl,
    make_settings,
    open_services,
    queued,
    run,
)


@pytest.fixture(scope="module")
def windmill():
    jobs = WindmillJobs()
    server = ThreadServer(jobs.app)
    jobs.url = server.url
    yield jobs
    server.stop()


@pytest.fixture
def wm(windmill):
    windmill.jobs.clear()
    windmill.cancels.clear()
    return windmill


def _settings(base_url: str, **kw):
    return make_settings(
        crawl_webhook_url=f"{base_url}/api/w/waggle/jobs/run/f/f/waggle/crawl_level",
        crawl_webhook_token="wm-token",
        crawl_stall_s=kw.pop("crawl_stall_s", 900.0),
        **kw,
    )


def _check(db_url, settings):
    async def go():
        services = await open_services(db_url, settings)
        try:
            return await watchdog.check_once(services)
        finally:
            await close_services(services)

    return run(go())


def test_windmill_base_from_the_webhook_url():
    assert watchdog.windmill_base("http://wm:8000/api/w/waggle/jobs/run/f/f/waggle/crawl_level") == (
        "http://wm:8000", "waggle")
    assert watchdog.windmill_base("https://x.example/base/api/w/ws2/jobs/run_wait_result/f/a") == (
        "https://x.example/base", "ws2")
    assert watchdog.windmill_base(None) is None
    assert watchdog.windmill_base("http://hook.example/trigger") is None


def test_running_job_leaves_the_crawl_alone(migrated_db_url, wm):
    job = str(uuid.uuid4())
    wm.jobs[job] = queued(job)
    with psycopg.connect(migrated_db_url, autocommit=True) as conn:
        crawl_id = insert_crawl(conn, job_id=job)
        assert _check(migrated_db_url, _settings(wm.url)) == []
        assert crawl_row(conn, crawl_id)["state"] == "running"
    assert wm.requests >= 1


def test_cancelled_job_closes_the_crawl(migrated_db_url, wm):
    job = str(uuid.uuid4())
    wm.jobs[job] = completed(job, canceled=True, canceled_by="admin", reason="operator stop")
    with psycopg.connect(migrated_db_url, autocommit=True) as conn:
        crawl_id = insert_crawl(conn, job_id=job, depth=1, job_depth=1)
        closed = _check(migrated_db_url, _settings(wm.url))
        assert [c for c, _ in closed] == [str(crawl_id)]
        row = crawl_row(conn, crawl_id)
        assert row["state"] == "failed" and row["stop_reason"] == "failed" and row["finished_at"]
        assert "cancelled" in row["error"] and job in row["error"] and "level 1" in row["error"]
        assert "operator stop" in row["error"] and "start a new crawl" in row["error"]


def test_a_closed_crawl_keeps_the_captures_its_progress_events_reported(migrated_db_url, wm):
    """ledger.crawl.salvage: a job that ended without its report (crashed, cancelled) leaves the
    captures it finished recorded, with their submissions for admission (the reconciler's, here:
    no S3 configured)."""
    job, task = str(uuid.uuid4()), str(uuid.uuid4())
    wm.jobs[job] = completed(job, canceled=True, canceled_by="admin", reason="operator stop")
    with psycopg.connect(migrated_db_url, autocommit=True) as conn:
        crawl_id = insert_crawl(conn, job_id=job)
        pages = [conn.execute(
            "INSERT INTO crawl_pages (crawl_id, url, url_key, host, depth) VALUES (%s, %s, %s, 'example.org', 0)"
            " RETURNING id", (crawl_id, url, url)).fetchone()[0]
            for url in ("https://example.org/", "https://example.org/b")]
        conn.execute("INSERT INTO crawl_progress (page_id, crawl_id, depth, phase, status, task_id, manifest_location)"
                     " VALUES (%s, %s, 0, 'done', 'captured', %s, 's3://browserhive/t.result.json')",
                     (pages[0], crawl_id, task))
        _check(migrated_db_url, _settings(wm.url, s3_bucket="browserhive"))
        assert crawl_row(conn, crawl_id)["pages_captured"] == 1
        got = conn.execute("SELECT url, state, task_id FROM crawl_pages WHERE crawl_id = %s ORDER BY id",
                           (crawl_id,)).fetchall()
        assert got == [("https://example.org/", "captured", task), ("https://example.org/b", "pending", None)]
        assert conn.execute("SELECT correlation_id, manifest_key FROM capture_submissions WHERE task_id = %s",
                            (task,)).fetchone() == (str(crawl_id), "t.result.json")


def test_failed_job_closes_with_the_flow_error(migrated_db_url, wm):
    job = str(uuid.uuid4())
    wm.jobs[job] = completed(job, result={"error": {"name": "ServerUnavailable", "message": "no capture server answered"}})
    with psycopg.connect(migrated_db_url, autocommit=True) as conn:
        crawl_id = insert_crawl(conn, job_id=job)
        _check(migrated_db_url, _settings(wm.url))
        row = crawl_row(conn, crawl_id)
        assert row["state"] == "failed"
        assert "failed (ServerUnavailable: no capture server answered)" in row["error"]
        assert "logs" in row["error"]


def test_success_without_report_closes_but_with_report_does_not(migrated_db_url, wm):
    job = str(uuid.uuid4())
    wm.jobs[job] = completed(job, success=True, result={"reported": False})
    with psycopg.connect(migrated_db_url, autocommit=True) as conn:
        reported = insert_crawl(conn, job_id=job)
        conn.execute(
            "INSERT INTO crawl_level_reports (crawl_id, depth, report_sha256, answer) VALUES (%s, 0, %s, '{}')",
            (reported, "a" * 64),
        )
        assert _check(migrated_db_url, _settings(wm.url)) == []
        assert crawl_row(conn, reported)["state"] == "running"
        conn.execute("DELETE FROM crawls WHERE id = %s", (reported,))

        silent = insert_crawl(conn, job_id=job)
        _check(migrated_db_url, _settings(wm.url))
        row = crawl_row(conn, silent)
        assert row["state"] == "failed" and "without the ledger receiving its level report" in row["error"]


def test_job_unknown_to_windmill_closes(migrated_db_url, wm):
    with psycopg.connect(migrated_db_url, autocommit=True) as conn:
        crawl_id = insert_crawl(conn, job_id=str(uuid.uuid4()))
        _check(migrated_db_url, _settings(wm.url))
        assert "unknown to Windmill" in crawl_row(conn, crawl_id)["error"]


def test_dispatch_in_flight_is_not_judged_by_the_previous_job(migrated_db_url, wm):
    """Level 0 reported (current_depth 1), level 1 dispatch not yet recorded: job of level 0 done."""
    job = str(uuid.uuid4())
    wm.jobs[job] = completed(job, success=True)
    with psycopg.connect(migrated_db_url, autocommit=True) as conn:
        crawl_id = insert_crawl(conn, job_id=job, job_depth=0, depth=1)
        assert _check(migrated_db_url, _settings(wm.url)) == []
        assert crawl_row(conn, crawl_id)["state"] == "running"


def test_stall_closes_and_cancels_the_running_job(migrated_db_url, wm):
    job = str(uuid.uuid4())
    wm.jobs[job] = queued(job)
    with psycopg.connect(migrated_db_url, autocommit=True) as conn:
        fresh = insert_crawl(conn, job_id=job, idle_s=5)
        assert _check(migrated_db_url, _settings(wm.url, crawl_stall_s=60)) == []
        conn.execute("UPDATE crawls SET last_progress_at = now() - interval '61 seconds' WHERE id = %s", (fresh,))
        closed = _check(migrated_db_url, _settings(wm.url, crawl_stall_s=60))
        assert len(closed) == 1
        row = crawl_row(conn, fresh)
        assert row["state"] == "failed"
        idle = int(re.search(r"no progress for (\d+) s", row["error"]).group(1))
        assert 61 <= idle < 120 and "WAGGLE_CRAWL_STALL_S=60" in row["error"]
        assert "the job was cancelled" in row["error"]
    assert [c[0] for c in wm.cancels] == [job]
    assert wm.jobs[job]["canceled"] is True


def test_windmill_down_only_the_stall_rule_applies(migrated_db_url):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    with psycopg.connect(migrated_db_url, autocommit=True) as conn:
        crawl_id = insert_crawl(conn, job_id=str(uuid.uuid4()), idle_s=10)
        assert _check(migrated_db_url, _settings(dead, crawl_stall_s=60)) == []
        assert crawl_row(conn, crawl_id)["state"] == "running"
        conn.execute("UPDATE crawls SET last_progress_at = now() - interval '2 minutes' WHERE id = %s", (crawl_id,))
        assert len(_check(migrated_db_url, _settings(dead, crawl_stall_s=60))) == 1
        assert "no progress" in crawl_row(conn, crawl_id)["error"]


def test_no_windmill_configured_stall_still_applies(migrated_db_url):
    with psycopg.connect(migrated_db_url, autocommit=True) as conn:
        crawl_id = insert_crawl(conn, idle_s=120)
        closed = _check(migrated_db_url, make_settings(crawl_stall_s=60))
        assert len(closed) == 1
        assert "no Windmill job recorded" in crawl_row(conn, crawl_id)["error"]


def test_close_is_skipped_when_the_crawl_moved_on(migrated_db_url, wm):
    """A report that lands between the watchdog's read and its close wins."""
    job = str(uuid.uuid4())
    with psycopg.connect(migrated_db_url, autocommit=True) as conn:
        crawl_id = insert_crawl(conn, job_id=job)

        async def go():
            services = await open_services(migrated_db_url, _settings(wm.url))
            try:
                async with services.pool.connection() as c:
                    cur = await c.execute("SELECT * FROM crawls WHERE id = %s", (crawl_id,))
                    snapshot = await cur.fetchone()
                conn.execute("UPDATE crawls SET last_progress_at = now(), current_depth = 1 WHERE id = %s", (crawl_id,))
                return await watchdog._close(services, snapshot, "stale")
            finally:
                await close_services(services)

        assert run(go()) is False
        assert crawl_row(conn, crawl_id)["state"] == "running"


def test_run_periodically_closes_within_a_few_intervals(migrated_db_url, wm):
    job = str(uuid.uuid4())
    wm.jobs[job] = queued(job)
    with psycopg.connect(migrated_db_url, autocommit=True) as conn:
        crawl_id = insert_crawl(conn, job_id=job)

        async def go():
            services = await open_services(migrated_db_url, _settings(wm.url, watchdog_interval_s=0.1))
            task = asyncio.create_task(watchdog.run_periodically(services))
            try:
                await asyncio.sleep(0.3)
                assert crawl_row(conn, crawl_id)["state"] == "running"
                wm.jobs[job] = completed(job, canceled=True)  # cancelled in Windmill's UI
                started = time.monotonic()
                while crawl_row(conn, crawl_id)["state"] == "running":
                    assert time.monotonic() - started < 3, "watchdog did not close the crawl"
                    await asyncio.sleep(0.05)
                return time.monotonic() - started
            finally:
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                await close_services(services)

        elapsed = run(go())
        assert elapsed < 2.5  # a few 0.1 s intervals (generous: the test machine is shared)


def test_lease_of_a_cancelled_job_is_released_by_the_watchdog(migrated_db_url, wm):
    """Issue 12: a level's host lease held by a Windmill job that was cancelled (no report will
    come) ends when the watchdog closes the crawl; the host's gap then runs from the close (the
    job may have captured until then), and another crawl's level waiting for it can be claimed."""
    from ledger.crawl import leases

    job = str(uuid.uuid4())
    settings = _settings(wm.url)
    with psycopg.connect(migrated_db_url, autocommit=True) as conn:
        holder, waiter = insert_crawl(conn), insert_crawl(conn)
        for crawl_id, url in ((holder, "https://s.test/"), (waiter, "https://s.test/w")):
            conn.execute("INSERT INTO crawl_pages (crawl_id, url, url_key, depth, host) VALUES (%s, %s, %s, 0, 's.test')",
                         (crawl_id, url, url))

    async def claim(crawl_id):
        services = await open_services(migrated_db_url, settings)
        try:
            return await leases.claim_level(services.pool, crawl_id, 0, lease_s=60)
        finally:
            await close_services(services)

    assert run(claim(holder)).leased == ["s.test"]
    assert run(claim(waiter)).waiting
    with psycopg.connect(migrated_db_url, autocommit=True) as conn:
        conn.execute("UPDATE crawls SET last_job_id = %s, last_job_depth = 0 WHERE id = %s", (job, holder))
        conn.execute("UPDATE host_leases SET job_id = %s", (job,))
        wm.jobs[job] = completed(job, canceled=True, canceled_by="operator")
        closed = _check(migrated_db_url, settings)
        assert [c for c, _ in closed] == [str(holder)]
        assert conn.execute("SELECT count(*) FROM host_leases").fetchone()[0] == 0
        (age_s,) = conn.execute("SELECT extract(epoch FROM now() - last_capture_at) FROM hosts WHERE host = 's.test'"
                                ).fetchone()
        assert 0 <= age_s < 30
        # the waiting crawl is untouched by the watchdog (it waits, it is not stuck) and now gets the host
        assert crawl_row(conn, waiter)["state"] == "running"
    got = run(claim(waiter))
    assert got.leased == ["s.test"] and got.frontier[0]["hostDelayMs"] == 1000
    assert got.frontier[0]["lastFinishedAt"] is not None
