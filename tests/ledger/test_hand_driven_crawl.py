"""A crawl driven by hand over real HTTP: the ledger under uvicorn (JWT identity from the dev
issuer, Postgres, OpenFGA and S3 stand-ins), the fake Windmill webhook, and a fake flow that
writes manifests and links files to S3 and posts level reports with the flow's token until the
ledger ends the crawl."""

from __future__ import annotations

import hashlib
import time
import uuid
from datetime import datetime, timedelta, timezone

import httpx
import psycopg
from typer.testing import CliRunner

from ledger.api.app import create_app
from ledger.cli import app as waggle
from tests.archive.helpers import manifest, put_json, put_wacz, wacz_bytes
from tests.fixtures.ledger import ServerThread, ledger_settings

SITE = {  # page → links found on it
    "https://site.test/": [{"href": "https://site.test/a"}, {"href": "https://site.test/b"},
                           {"href": "https://site.test/c#top"}, {"href": "https://site.test/a"},
                           {"href": "https://other.test/"}, {"href": "https://site.test/hidden", "rel": "nofollow"}],
    "https://site.test/a": [{"href": "https://site.test/d"}, {"href": "https://site.test/e"}],
    "https://site.test/b": [{"href": "https://site.test/a"}],
    "https://site.test/c": [],
    "https://site.test/d": [{"href": "https://site.test/f"}],
}
FAILED_BUT_ARCHIVED = "https://site.test/b"  # the flow saw a failure; the manifest shows a WACZ
FAILED = "https://site.test/c"


def iso(t: datetime) -> str:
    return t.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def fake_flow_level(s3_server, body: dict, clock: list[datetime]) -> dict:
    """What crawl_level would report for the dispatched ``body`` (one level)."""
    results = []
    for item in body["frontier"]:
        url, task = item["url"], str(uuid.uuid4())
        submitted = clock[0]
        clock[0] += timedelta(seconds=1)
        result = {"url": url, "taskId": task, "correlationId": body["crawl_id"],
                  "submittedAt": iso(submitted), "finishedAt": iso(clock[0])}
        if url == FAILED:
            results.append({**result, "status": "failed", "skipReason": "timeout",
                            "manifestError": "s3://browserhive/x.result.json: not written within 10000ms"})
            continue
        key = f"{task}_{body['crawl_id']}"
        m = manifest(task, url=url, bucket=s3_server.bucket)
        put_json(s3_server, key + ".result.json", m)
        put_wacz(s3_server, m["artifacts"]["wacz"], wacz_bytes(url))  # whole: the ledger checks it
        result["manifestLocation"] = f"s3://{s3_server.bucket}/{key}.result.json"
        if body["capture_formats"]["links"]:
            put_json(s3_server, key + ".links.json", {"taskId": task, "url": url, "links": SITE.get(url, [])})
            result["linksLocation"] = f"s3://{s3_server.bucket}/{key}.links.json"
        if url == FAILED_BUT_ARCHIVED:  # a whole WACZ: only that turns a failed page into a capture
            doc = manifest(task, url=url, bucket=s3_server.bucket)
            put_wacz(s3_server, doc["artifacts"]["wacz"], wacz_bytes(url))
            results.append({**result, "status": "failed", "skipReason": "result aged out of the cache"})
        else:
            results.append({**result, "status": "captured"})
    compiled = {"typescript": "6.0.3", "hostTypes": "v0.2.0",
                "scripts": [{"id": s["id"], "version": s["version"],
                             "sha256": hashlib.sha256(("js:" + s["source"]).encode()).hexdigest()}
                            for s in body["scripts"]]}
    return {"depth": body["depth"], "results": results, "compiled": compiled}


def test_crawl_by_hand(migrated_db_url, ledger_fga, dev_issuer, fake_webhook, s3_server):
    runner = CliRunner()
    loaded = runner.invoke(waggle, ["scripts", "load-defaults"], env={"WAGGLE_DATABASE_URL": migrated_db_url})
    assert loaded.exit_code == 0 and "autoscroll@1 added" in loaded.output
    settings = ledger_settings(
        migrated_db_url, ledger_fga, fake_webhook.url, dev_identity=False, oidc_issuer=dev_issuer.issuer,
        s3_endpoint=s3_server.endpoint, s3_bucket=s3_server.bucket, s3_region=s3_server.region,
        s3_access_key_id=s3_server.access_key_id, s3_secret_access_key=s3_server.secret_access_key)
    server = ServerThread(create_app(settings, periodic=False)).start()
    try:
        user = {"authorization": f"Bearer {dev_issuer.mint('alice', ['acme'])}"}
        flow = {"authorization": f"Bearer {dev_issuer.mint('waggle-flow', ['acme'])}"}
        with httpx.Client(base_url=server.url, timeout=30) as api:
            r = api.post("/api/crawls", json={"seeds": ["https://site.test/"], "maxPages": 5, "maxDepth": 2,
                                              "perHostDelayMs": 500}, headers=user)
            assert r.status_code == 202, r.text
            crawl_id = r.json()["crawlId"]
            first = api.get(f"/api/crawls/{crawl_id}", headers=user).json()
            assert (first["hostsInFlight"], first["pagesPending"], first["pagesFailed"]) == (["site.test"], 1, 0)
            answers, clock = [], [datetime(2026, 9, 19, 14, 0, tzinfo=timezone.utc)]
            deadline = time.monotonic() + 30
            while True:
                # the ledger dispatches after answering: wait for the level's webhook call
                while len(fake_webhook.bodies(crawl_id)) <= len(answers):
                    assert time.monotonic() < deadline, "the ledger did not dispatch the next level"
                    time.sleep(0.02)
                body = fake_webhook.bodies(crawl_id)[len(answers)]
                r = api.post(f"/api/crawls/{crawl_id}/pages", json=fake_flow_level(s3_server, body, clock),
                             headers=flow)
                assert r.status_code == 200, r.text
                answers.append(r.json())
                if r.json()["stopReason"] is not None:
                    break
            # admission and recovery run after the answer (ledger.archive.verify): wait for them
            recovered_by = time.monotonic() + 15
            while (view := api.get(f"/api/crawls/{crawl_id}", headers=user).json())["pagesCaptured"] < 4:
                assert time.monotonic() < recovered_by, f"recovery after the answer did not happen: {view}"
                time.sleep(0.05)
            bodies = fake_webhook.bodies(crawl_id)
    finally:
        server.stop()

    assert [b["depth"] for b in bodies] == [0, 1, 2]
    assert [[f["url"] for f in b["frontier"]] for b in bodies] == [
        ["https://site.test/"],
        ["https://site.test/a", "https://site.test/b", "https://site.test/c"],
        ["https://site.test/d"],  # page budget 5: seed + a, b, c + d; e does not fit
    ]
    assert [b["capture_formats"]["links"] for b in bodies] == [True, True, False]
    assert [s["id"] for s in bodies[0]["scripts"]] == ["autoscroll"]
    # the next level knows when the host last finished (politeness across the level boundary)
    assert bodies[1]["frontier"][0]["lastFinishedAt"] == "2026-09-19T14:00:01.000Z"
    assert bodies[2]["frontier"][0]["lastFinishedAt"] == "2026-09-19T14:00:04.000Z"
    assert [a["stopReason"] for a in answers] == [None, None, "max_depth"]
    assert view["state"] == "succeeded"
    assert view["stopReason"] == "max_pages"  # the first reason recorded wins
    assert view["pagesCaptured"] == 4  # seed, a, b (recovered from its manifest), d
    assert view["pagesDiscovered"] == 3 + 3  # the last level asked for no links
    assert view["drops"] == {"nofollow": 1, "out_of_scope": 1}
    assert view["failures"] == [{"url": FAILED, "depth": 1, "reason": "timeout", "failureClass": None}]
    assert (view["pagesFailed"], view["pagesSkipped"], view["hostsInFlight"]) == (1, 0, [])
    assert view["lastJob"] == {"id": fake_webhook.job_ids[-1], "depth": 2}
    assert view["scripts"][0]["jsSha256"] and view["scripts"][0]["compiledWith"]["typescript"] == "6.0.3"
    with psycopg.connect(migrated_db_url) as conn:
        archived = {r[0] for r in conn.execute("SELECT source_url FROM archives")}
        submissions = conn.execute("SELECT count(*) FROM capture_submissions").fetchone()[0]
        outbox = conn.execute("SELECT count(*) FROM fga_outbox").fetchone()[0]
    assert archived == {"https://site.test/", "https://site.test/a", "https://site.test/b", "https://site.test/d"}
    assert submissions == 5 and outbox == 4


def test_served_app_with_periodic_tasks_starts_and_stops(migrated_db_url, ledger_fga, dev_issuer, s3_server):
    """``create_app(settings)`` builds its own Services, mounts the other parts' routers and runs
    the outbox worker, reconciler and watchdog until shutdown."""
    settings = ledger_settings(
        migrated_db_url, ledger_fga, None, dev_identity=False, oidc_issuer=dev_issuer.issuer,
        s3_endpoint=s3_server.endpoint, s3_bucket=s3_server.bucket, s3_region=s3_server.region,
        s3_access_key_id=s3_server.access_key_id, s3_secret_access_key=s3_server.secret_access_key,
        drain_interval_s=0.2)
    app = create_app(settings)
    server = ServerThread(app).start()
    try:
        with httpx.Client(base_url=server.url, timeout=10) as api:
            assert api.get("/healthz").json() == {"status": "ok"}
            assert api.get("/api/archives").status_code == 401
            assert api.get("/").status_code == 200
            r = api.post("/api/crawls", json={"seeds": ["https://a.test/"]})
            assert r.json() == {"error": "Route POST:/api/crawls not found"}
        # the outbox worker started by the lifespan delivers a queued tuple to OpenFGA
        subject = f"user:zed-{uuid.uuid4().hex[:8]}"
        with psycopg.connect(migrated_db_url, autocommit=True) as conn:
            conn.execute("INSERT INTO fga_outbox (payload) VALUES (%s::jsonb)", (
                '{"writes": [{"user": "%s", "relation": "submitter", "object": "organization:zeta"}]}' % subject,))
            deadline = time.monotonic() + 15
            while conn.execute("SELECT processed_at FROM fga_outbox").fetchone()[0] is None:
                assert time.monotonic() < deadline, "the outbox worker did not run"
                time.sleep(0.1)
        assert ledger_fga.check(subject, "can_submit", "organization:zeta")
    finally:
        server.stop()
    assert not server.thread.is_alive()
