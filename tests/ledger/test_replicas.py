"""Two real ``waggle serve`` processes on one Postgres (issue 12): racing on the same level
report (one accepted report, one dispatch of the next level, the same answer everywhere) and on
the outbox (every row delivered by exactly one drain, counted by a trigger on the database)."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest

from tests.fixtures.ledger import LedgerHarness

WHO = LedgerHarness.who()
NO_SCRIPTS = {"typescript": "6.0.3", "hostTypes": "v0.2.0", "scripts": []}
ROOT = Path(__file__).resolve().parents[2]
LISTENING = re.compile(r"Uvicorn running on (http://127\.0\.0\.1:\d+)")


def _env(db_url, fga, webhook_url, s3) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WAGGLE_")}
    env.update({
        "WAGGLE_DATABASE_URL": db_url, "WAGGLE_DEV_IDENTITY": "1",
        "WAGGLE_FGA_API_URL": fga.api_url, "WAGGLE_FGA_STORE_ID": fga.store_id, "WAGGLE_FGA_MODEL_ID": fga.model_id,
        "WAGGLE_S3_ENDPOINT": s3.endpoint, "WAGGLE_S3_BUCKET": s3.bucket,
        "WAGGLE_S3_ACCESS_KEY_ID": s3.access_key_id, "WAGGLE_S3_SECRET_ACCESS_KEY": s3.secret_access_key,
        "WAGGLE_CRAWL_WEBHOOK_URL": webhook_url, "WAGGLE_CRAWL_WEBHOOK_TOKEN": "wm-token",
        "WAGGLE_DRAIN_INTERVAL_S": "0.1", "WAGGLE_LEASE_INTERVAL_S": "0.2", "WAGGLE_STATE_DIR": "/nonexistent",
    })
    return env


def _serve(env: dict[str, str], log: Path) -> tuple[subprocess.Popen, str]:
    out = log.open("w")
    waggle = str(Path(sys.executable).parent / "waggle")
    proc = subprocess.Popen([waggle, "serve", "--port", "0", "--no-migrate"],
                            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = LISTENING.search(log.read_text())
        if found:
            return proc, found.group(1)
        if proc.poll() is not None:
            raise AssertionError(f"waggle serve exited: {log.read_text()[-2000:]}")
        time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"waggle serve did not listen: {log.read_text()[-2000:]}")


@pytest.fixture
def replicas(migrated_db_url, ledger_fga, fake_webhook, s3_server, tmp_path) -> Iterator[list[str]]:
    env = _env(migrated_db_url, ledger_fga, fake_webhook.url, s3_server)
    procs = []
    try:
        for i in range(2):
            procs.append(_serve(env, tmp_path / f"ledger-{i}.log"))
        yield [url for _, url in procs]
    finally:
        for proc, _ in procs:
            proc.terminate()
        for proc, _ in procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


def test_two_replicas_race_on_one_level_report(replicas, migrated_db_url, fake_webhook):
    async def go():
        async with httpx.AsyncClient(timeout=30) as http:
            r = await http.post(f"{replicas[0]}/api/crawls", headers=WHO, json={
                "seeds": ["https://a.test/"], "scripts": [], "maxDepth": 2})
            assert r.status_code == 202, r.text
            crawl_id = r.json()["crawlId"]
            # level 0 dispatched first (a background task of the start; under load it came after
            # the reports below, which a real flow cannot outrun — then level 0 was never sent)
            deadline = time.monotonic() + 10
            while not fake_webhook.bodies(crawl_id) and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            with psycopg.connect(migrated_db_url, autocommit=True) as conn:  # level 1 already holds a page
                conn.execute("INSERT INTO crawl_pages (crawl_id, url, url_key, depth, host) VALUES"
                             " (%s, 'https://b.test/', 'https://b.test/', 1, 'b.test')", (crawl_id,))
            body = {"depth": 0, "compiled": NO_SCRIPTS, "results": [
                {"url": "https://a.test/", "status": "captured", "finishedAt": "2026-09-19T14:53:41.000Z"}]}
            answers = await asyncio.gather(*[
                http.post(f"{replicas[i % 2]}/api/crawls/{crawl_id}/pages", headers=WHO, json=body)
                for i in range(10)])
            return crawl_id, answers

    crawl_id, answers = asyncio.run(go())
    assert {a.status_code for a in answers} == {200}, [a.text for a in answers]
    assert {a.text for a in answers} == {answers[0].text}
    assert answers[0].json()["next"] == [{"url": "https://b.test/", "host": "b.test", "depth": 1}]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and len(fake_webhook.bodies(crawl_id)) < 2:
        time.sleep(0.1)
    time.sleep(1.0)  # both replicas' lease loops had several rounds to dispatch it again
    assert [b["depth"] for b in fake_webhook.bodies(crawl_id)] == [0, 1]
    with psycopg.connect(migrated_db_url) as conn:
        assert conn.execute("SELECT count(*) FROM crawl_level_reports WHERE crawl_id = %s", (crawl_id,)
                            ).fetchone()[0] == 1
        assert conn.execute("SELECT pages_captured, current_depth, level_state FROM crawls WHERE id = %s",
                            (crawl_id,)).fetchone() == (1, 1, "dispatched")
        assert conn.execute("SELECT host, depth FROM host_leases WHERE crawl_id = %s", (crawl_id,)
                            ).fetchall() == [("b.test", 1)]


def test_two_replicas_drain_each_outbox_row_once(replicas, migrated_db_url, ledger_fga):
    rows = 300
    with psycopg.connect(migrated_db_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE outbox_deliveries (id bigint NOT NULL)")
        conn.execute(
            "CREATE FUNCTION count_delivery() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
            " INSERT INTO outbox_deliveries VALUES (NEW.id); RETURN NULL; END $$")
        conn.execute("CREATE TRIGGER outbox_delivered AFTER UPDATE OF processed_at ON fga_outbox FOR EACH ROW"
                     " WHEN (NEW.processed_at IS NOT NULL) EXECUTE FUNCTION count_delivery()")
        with conn.transaction():
            for i in range(rows):
                conn.execute("INSERT INTO fga_outbox (payload) VALUES (%s::jsonb)", (
                    '{"writes": [{"user": "user:r%d", "relation": "owner", "object": "capture_job:replica-%d"}]}' % (i, i),))
        deadline = time.monotonic() + 60
        pending = rows
        while time.monotonic() < deadline and pending:
            pending = conn.execute("SELECT count(*) FROM fga_outbox WHERE processed_at IS NULL").fetchone()[0]
            time.sleep(0.2)
        assert pending == 0
        time.sleep(0.5)
        counts = conn.execute("SELECT id, count(*) FROM outbox_deliveries GROUP BY id").fetchall()
        assert len(counts) == rows and {n for _, n in counts} == {1}
        assert conn.execute("SELECT count(*) FROM fga_outbox WHERE attempts > 0").fetchone()[0] == 0
    assert ledger_fga.check("user:r7", "owner", "capture_job:replica-7")


def test_health_lists_both_replicas(replicas):
    deadline = time.monotonic() + 15
    seen: list = []
    while time.monotonic() < deadline:
        body = httpx.get(f"{replicas[0]}/api/health", timeout=10).json()
        seen = body["replicas"]
        if len(seen) == 2:
            break
        time.sleep(0.5)
    assert len(seen) == 2 and sum(r["self"] for r in seen) == 1, seen
    assert body["crawls"] == {"running": 0, "waitingLevels": 0, "leasedHosts": 0}


def test_a_loop_round_runs_on_one_holder_at_a_time(migrated_db_url):
    """``ledger.loops.run_exclusive``: while one round holds the loop's advisory lock, a round of
    the same loop elsewhere (another pool = another replica) is skipped; another loop is not."""
    from ledger.db.pool import open_pool
    from ledger.loops import run_exclusive

    async def go():
        a, b = await open_pool(migrated_db_url, max_size=2), await open_pool(migrated_db_url, max_size=2)
        try:
            inside = asyncio.Event()
            release = asyncio.Event()

            async def long_round():
                inside.set()
                await release.wait()

            first = asyncio.create_task(run_exclusive(a, 1, long_round))
            await inside.wait()
            ran: list[int] = []

            async def mark(key):
                ran.append(key)

            skipped = await run_exclusive(b, 1, lambda: mark(1))
            other = await run_exclusive(b, 2, lambda: mark(2))
            release.set()
            assert await first is True
            after = await run_exclusive(b, 1, lambda: mark(1))
            return skipped, other, after, ran
        finally:
            await a.close()
            await b.close()

    skipped, other, after, ran = asyncio.run(go())
    assert (skipped, other, after, ran) == (False, True, True, [2, 1])
