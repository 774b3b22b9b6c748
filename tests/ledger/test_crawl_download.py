"""The crawl as one file (issue 25 item 4 and 7): ``POST /api/crawls/{id}/download`` builds one
WACZ 1.1.1 of the archives the caller may view (first request: 202, then a signed S3 URL), that
``wacz validate`` (py-wacz) accepts and pywb replays page by page, with one sorted CDXJ index,
one pages.jsonl and a datapackage that says what is incomplete or missing; the same member set is
built once; a late member makes a new file — against the real ledger, Postgres, OpenFGA
stand-in and S3 stand-in."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tempfile
import time
import uuid
import zipfile
from pathlib import Path

import anyio
import httpx
import psycopg
import pytest

from tests.devstack.test_replay_crawl import chain_html, page_wacz
from tests.fixtures.ledger import LedgerHarness, ledger_settings, open_ledger
from tests.ledger.test_crawl_collection import set_state, start, store_of

pytestmark = pytest.mark.anyio
WHO = LedgerHarness.who()
OUTSIDER = LedgerHarness.who("mallory", "evil")
VENV_BIN = Path(sys.executable).parent
PYWB_REPLAY = Path(__file__).resolve().parents[1] / "devstack" / "pywb_replay.py"


@pytest.fixture
def settings(migrated_db_url, ledger_fga, fake_webhook, s3_server):
    return ledger_settings(migrated_db_url, ledger_fga, fake_webhook.url, s3_bucket=s3_server.bucket)


def admit(db_url, s3_server, fga, crawl_id, url, title, link, *, complete=True, viewable=True):
    """Page ``url`` captured as a real WACZ (WARC + CDXJ with offsets) and admitted."""
    task = str(uuid.uuid4())
    with tempfile.TemporaryDirectory() as tmp:
        data = page_wacz(url, chain_html(title, link), Path(tmp))
    key = f"{task}_{crawl_id}.wacz"
    s3_server.client().put_object(Bucket=s3_server.bucket, Key=key, Body=data)
    with psycopg.connect(db_url) as conn:
        conn.execute("UPDATE crawl_pages SET state = 'captured', task_id = %s WHERE crawl_id = %s AND url = %s",
                     (task, crawl_id, url))
        archive_id = conn.execute(
            "INSERT INTO archives (task_id, correlation_id, bucket, object_key, source_url, captured_at, wacz_complete,"
            " missing_body_count) VALUES (%s, %s, %s, %s, %s, now(), %s, %s) RETURNING id",
            (task, crawl_id, s3_server.bucket, key, url, complete, None if complete else 1)).fetchone()[0]
    if viewable:
        fga.write(writes=[{"user": "organization:acme#member", "relation": "viewer", "object": f"archive:{archive_id}"}])
    return str(archive_id)


async def download(h, crawl_id, headers=WHO, timeout_s=90.0):
    """POST download until it is ready → (the 200 body, the first status seen)."""
    first = None
    deadline = time.monotonic() + timeout_s
    while True:
        r = await h.client.post(f"/api/crawls/{crawl_id}/download", headers=headers)
        first = first or r.status_code
        if r.status_code != 202:
            assert r.status_code == 200, r.text
            return r.json(), first
        assert time.monotonic() < deadline, "the combined file was not built in time"
        await anyio.sleep(0.3)


async def test_one_wacz_that_validates_replays_and_says_what_it_lacks(settings, s3_server, ledger_fga, tmp_path):
    site = "http://chain.test"
    seeds = [f"{site}/index.html", f"{site}/a.html", f"{site}/b.html", f"{site}/gone.html"]
    db = settings.database_url
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds)
        admit(db, s3_server, ledger_fga, crawl_id, seeds[0], "Chain 0", "a.html")
        admit(db, s3_server, ledger_fga, crawl_id, seeds[1], "Chain A", "b.html", complete=False)
        admit(db, s3_server, ledger_fga, crawl_id, seeds[2], "Chain B", "c.html")
        set_state(db, crawl_id, seeds[3], "failed", "http_error: HTTP 404")
        body, first = await download(h, crawl_id)
        again, again_first = await download(h, crawl_id)
        outsider = await h.client.post(f"/api/crawls/{crawl_id}/download", headers=OUTSIDER)
    assert first == 202 and again_first == 200  # built on the first request, then served as built
    assert again["url"].split("?")[0] == body["url"].split("?")[0]
    assert (outsider.status_code, outsider.json()) == (404, {"error": "not found"})
    assert body["name"] == f"chain.test-{time.strftime('%Y-%m-%d', time.gmtime())}-{crawl_id[:8]}.wacz"
    assert body["members"] == 3 and body["missingCount"] == 1 and body["expiresIn"] == 300
    got = httpx.get(body["url"])
    assert got.status_code == 200 and len(got.content) == body["bytes"]
    assert f'filename="{body["name"]}"' in got.headers["content-disposition"]
    f = tmp_path / body["name"]
    f.write_bytes(got.content)
    v = subprocess.run([str(VENV_BIN / "wacz"), "validate", "-f", str(f)], capture_output=True, text=True, timeout=120)
    assert v.returncode == 0 and "is valid" in v.stdout, v.stdout + v.stderr
    with zipfile.ZipFile(f) as zf:
        names = zf.namelist()
        warcs = [n for n in names if n.startswith("archive/")]
        index = zf.read("indexes/index.cdx").decode().splitlines()
        pages = [json.loads(line) for line in zf.read("pages/pages.jsonl").decode().splitlines()]
        package = json.loads(zf.read("datapackage.json"))
    assert len(warcs) == 3
    assert index == sorted(index) and {json.loads(line.split(" ", 2)[2])["filename"] for line in index} == \
        {n.removeprefix("archive/") for n in warcs}
    assert pages[0]["format"] == "json-pages-1.0" and sorted(p["url"] for p in pages[1:]) == sorted(seeds[:3])
    assert package["wacz_version"] == "1.1.1" and package["mainPageUrl"] == seeds[0]
    assert package["waggle"]["complete"] is False
    assert [m["url"] for m in package["waggle"]["incomplete"]] == [seeds[1]]
    assert package["waggle"]["missing"] == [{"url": seeds[3], "why": "failed", "reason": "http_error: HTTP 404"}]
    # pywb replays every page from the one file, and not the page the crawl did not capture
    root = tmp_path / "pywb"
    root.mkdir()
    replay = subprocess.run([sys.executable, str(PYWB_REPLAY), str(root), "coll", str(f), *seeds],
                            capture_output=True, text=True, timeout=180)
    lines = [json.loads(line) for line in replay.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == 5, replay.stderr[-2000:]
    assert sorted(lines[0]["indexed"]) == sorted(seeds[:3])
    assert [(x["status"], x["body"].split("<h1>")[1].split("<")[0] if x["status"] == 200 else None) for x in lines[1:]] == \
        [(200, "Chain 0"), (200, "Chain A"), (200, "Chain B"), (404, None)]


async def test_a_late_member_or_a_narrower_view_is_another_file(settings, s3_server, ledger_fga):
    site = "http://late.test"
    seeds = [f"{site}/index.html", f"{site}/a.html", f"{site}/b.html"]
    db = settings.database_url
    bob = LedgerHarness.who("bob", "acme")
    ledger_fga.write(writes=["user:bob submitter organization:acme"])
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds)
        admit(db, s3_server, ledger_fga, crawl_id, seeds[0], "Late 0", "a.html")
        hidden = admit(db, s3_server, ledger_fga, crawl_id, seeds[1], "Late A", "b.html", viewable=False)
        ledger_fga.write(writes=[f"user:alice owner capture_job:{uuid.uuid4()}"])  # noise: another job
        with psycopg.connect(db) as conn:  # alice owns the hidden capture's job: she may view it, bob not
            task = conn.execute("SELECT task_id FROM archives WHERE id = %s", (hidden,)).fetchone()[0]
        ledger_fga.write(writes=[f"capture_job:{task} parent archive:{hidden}", f"user:alice owner capture_job:{task}"])
        alices, _ = await download(h, crawl_id)
        bobs, _ = await download(h, crawl_id, headers=bob)
        admit(db, s3_server, ledger_fga, crawl_id, seeds[2], "Late B", "c.html")  # the reconciler admits a late one
        later, later_first = await download(h, crawl_id)
        empty = await h.client.post(f"/api/crawls/{await start(h, [site + '/x'])}/download", headers=WHO)
    assert (alices["members"], bobs["members"], later["members"]) == (2, 1, 3)
    assert len({alices["url"].split("?")[0], bobs["url"].split("?")[0], later["url"].split("?")[0]}) == 3
    assert later_first == 202
    with zipfile.ZipFile(io.BytesIO(httpx.get(bobs["url"]).content)) as zf:
        package = json.loads(zf.read("datapackage.json"))
    assert [m["why"] for m in package["waggle"]["missing"]] == ["not-viewable", "not-captured-yet"]
    assert empty.status_code == 409 and "no archive you may view" in empty.json()["error"]
