"""The crawl as one collection (issue 25 item 1 and 7): ``GET /api/crawls/{id}/collection`` lists
the crawl's admitted archives the caller may view, each a ledger path that Checks and redirects
to a freshly signed URL (which really fetches the WACZ), with its size and SHA-256; the pages
without a member are listed with why; outsiders get 404; a ticket opens the collection for the
replay origin; a session outlives the signed URLs (each read signs afresh) — against the real
ledger, Postgres, OpenFGA and S3 stand-in."""

from __future__ import annotations

import json
import hashlib
import time
import uuid

import anyio
import httpx
import psycopg
import pytest

from tests.archive.helpers import wacz_bytes
from tests.fixtures.ledger import LedgerHarness, ledger_settings, open_ledger
from tests.fixtures.s3_store import store_of

pytestmark = pytest.mark.anyio
WHO = LedgerHarness.who()
OUTSIDER = LedgerHarness.who("mallory", "evil")


@pytest.fixture
def settings(migrated_db_url, ledger_fga, fake_webhook, s3_server):
    return ledger_settings(migrated_db_url, ledger_fga, fake_webhook.url, s3_bucket=s3_server.bucket)




async def start(h, seeds, **body):
    r = await h.client.post("/api/crawls", json={"seeds": seeds, "scripts": [], **body}, headers=WHO)
    assert r.status_code == 202, r.text
    return r.json()["crawlId"]


def capture(db_url, s3_server, fga, crawl_id, url, *, viewable=True, complete=True, admitted=True):
    """Page ``url`` of the crawl captured: its WACZ in S3, its archive row and (``viewable``)
    the tuple that shares it with acme's members. → (archive id or None, the WACZ bytes)."""
    task = str(uuid.uuid4())
    data = wacz_bytes(url)
    key = f"{task}_{crawl_id}.wacz"
    s3_server.client().put_object(Bucket=s3_server.bucket, Key=key, Body=data)
    with psycopg.connect(db_url) as conn:
        conn.execute("UPDATE crawl_pages SET state = 'captured', task_id = %s WHERE crawl_id = %s AND url = %s",
                     (task, crawl_id, url))
        if not admitted:
            return None, data
        archive_id = conn.execute(
            "INSERT INTO archives (task_id, correlation_id, bucket, object_key, source_url, captured_at, wacz_complete,"
            " missing_body_count) VALUES (%s, %s, %s, %s, %s, now(), %s, %s) RETURNING id",
            (task, crawl_id, s3_server.bucket, key, url, complete, None if complete else 2)).fetchone()[0]
    if viewable:
        fga.write(writes=[{"user": "organization:acme#member", "relation": "viewer", "object": f"archive:{archive_id}"}])
    return str(archive_id), data


def set_state(db_url, crawl_id, url, state, reason=None):
    with psycopg.connect(db_url) as conn:
        conn.execute("UPDATE crawl_pages SET state = %s, skip_reason = %s WHERE crawl_id = %s AND url = %s",
                     (state, reason, crawl_id, url))


async def test_members_signed_with_size_and_hash_and_the_missing_said_why(settings, s3_server, ledger_fga):
    seeds = [f"https://a.test/{n}" for n in ("seed", "incomplete", "hidden", "failed", "pending", "late", "robots")]
    db = settings.database_url
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds)
        seed_id, seed_wacz = capture(db, s3_server, ledger_fga, crawl_id, seeds[0])
        inc_id, inc_wacz = capture(db, s3_server, ledger_fga, crawl_id, seeds[1], complete=False)
        hidden_id, _ = capture(db, s3_server, ledger_fga, crawl_id, seeds[2], viewable=False)
        set_state(db, crawl_id, seeds[3], "failed", "http_error: HTTP 500")
        capture(db, s3_server, ledger_fga, crawl_id, seeds[5], admitted=False)
        set_state(db, crawl_id, seeds[6], "skipped", "robots")
        r = await h.client.get(f"/api/crawls/{crawl_id}/collection", headers=WHO)
        twin = await h.client.get(f"/api/crawls/{crawl_id}/collection.json", headers=WHO)
        reads = [await h.client.get(m["path"], headers=WHO) for m in r.json()["resources"]]
        hidden = await h.client.get(f"/api/crawls/{crawl_id}/members/{hidden_id}.wacz", headers=WHO)
        outsider = await h.client.get(f"/api/crawls/{crawl_id}/members/{seed_id}.wacz", headers=OUTSIDER)
        other = await start(h, ["https://elsewhere.test/"])  # a member of this crawl, asked through another
        not_member = await h.client.get(f"/api/crawls/{other}/members/{seed_id}.wacz", headers=WHO)
    assert r.status_code == 200, r.text
    assert twin.status_code == 200 and twin.json()["crawlId"] == crawl_id
    assert r.headers["cache-control"] == "no-store"
    body = r.json()
    assert body["profile"] == "multi-wacz-package" and body["running"] is True and body["state"] == "running"
    assert body["title"].startswith("a.test ") and body["expiresIn"] == 300
    assert [m["archiveId"] for m in body["resources"]] == [seed_id, inc_id]  # seed first, then in crawl order
    for member, data in zip(body["resources"], (seed_wacz, inc_wacz)):
        assert member["name"] == member["archiveId"] + ".wacz" and member["crawlId"] == crawl_id
        assert member["bytes"] == len(data)
        assert member["hash"] == "sha256:" + hashlib.sha256(data).hexdigest()
        assert member["path"] == f"/api/crawls/{crawl_id}/members/{member['archiveId']}.wacz"
    for read, data in zip(reads, (seed_wacz, inc_wacz)):  # Check, then 302 to a URL signed now
        assert read.status_code == 302 and read.headers["cache-control"] == "no-store"
        assert httpx.get(read.headers["location"]).content == data  # it reads the very object
    # not shared with this caller, an outsider, an archive of another crawl: 404 as every crawl route
    assert [x.status_code for x in (hidden, outsider, not_member)] == [404, 404, 404]
    assert body["resources"][0]["complete"] is True and body["resources"][0]["reason"] is None
    assert body["resources"][1]["complete"] is False and "2 without a body" in body["resources"][1]["reason"]
    assert {m["url"]: m["why"] for m in body["missing"]} == {
        seeds[2]: "not-viewable", seeds[3]: "failed", seeds[4]: "not-captured-yet", seeds[5]: "not-admitted-yet",
        seeds[6]: "skipped"}
    assert {m["url"]: m["reason"] for m in body["missing"]}[seeds[3]] == "http_error: HTTP 500"
    assert body["pages"] == {"total": 7, "inCollection": 2, "missing": 5} and body["missingCount"] == 5


async def test_sizes_are_measured_once_and_a_finished_crawl_says_so(settings, s3_server, ledger_fga):
    db = settings.database_url
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, ["https://b.test/", "https://b.test/x"])
        archive_id, _ = capture(db, s3_server, ledger_fga, crawl_id, "https://b.test/")
        first = await h.client.get(f"/api/crawls/{crawl_id}/collection", headers=WHO)
        with psycopg.connect(db) as conn:
            measured = conn.execute("SELECT measured_at FROM archive_files WHERE archive_id = %s", (archive_id,)).fetchall()
            conn.execute("UPDATE crawls SET state = 'succeeded', finished_at = now() WHERE id = %s", (crawl_id,))
        second = await h.client.get(f"/api/crawls/{crawl_id}/collection", headers=WHO)
        with psycopg.connect(db) as conn:
            again = conn.execute("SELECT measured_at FROM archive_files WHERE archive_id = %s", (archive_id,)).fetchall()
    assert len(measured) == 1 and again == measured
    assert first.json()["resources"][0]["hash"] == second.json()["resources"][0]["hash"]
    assert second.json()["running"] is False
    [missing] = second.json()["missing"]
    assert missing["why"] == "not-captured" and "ended before its capture" in missing["reason"]


async def test_outsiders_unknown_and_anonymous(settings, s3_server):
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, ["https://c.test/"])
        outsider = await h.client.get(f"/api/crawls/{crawl_id}/collection", headers=OUTSIDER)
        unknown = await h.client.get(f"/api/crawls/{uuid.uuid4()}/collection", headers=WHO)
        anonymous = await h.client.get(f"/api/crawls/{crawl_id}/collection")
        bad_id = await h.client.get("/api/crawls/nope/collection", headers=WHO)
        outsider_ticket = await h.client.post(f"/api/crawls/{crawl_id}/collection/ticket", headers=OUTSIDER)
    assert (outsider.status_code, outsider.json()) == (404, {"error": "not found"})
    assert (unknown.status_code, unknown.json()) == (404, {"error": "not found"})
    assert anonymous.status_code == 401
    assert bad_id.status_code in (400, 422) and "crawl_id" in bad_id.text
    assert (outsider_ticket.status_code, outsider_ticket.json()) == (404, {"error": "not found"})


async def test_a_ticket_opens_one_crawls_collection_only(settings, s3_server, ledger_fga):
    db = settings.database_url
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, ["https://d.test/"])
        other = await start(h, ["https://e.test/"])
        archive_id, _ = capture(db, s3_server, ledger_fga, crawl_id, "https://d.test/")
        r = await h.client.post(f"/api/crawls/{crawl_id}/collection/ticket", headers=WHO)
        assert r.status_code == 201, r.text
        path = r.json()["path"]
        assert path.startswith(f"/api/crawls/{crawl_id}/collection.json?ticket=")
        with_ticket = await h.client.get(path)  # no identity header: the ticket is the credential
        token = path.split("ticket=", 1)[1]
        elsewhere = await h.client.get(f"/api/crawls/{other}/collection.json?ticket={token}")
        forged = await h.client.get(f"/api/crawls/{crawl_id}/collection.json?ticket=x{token}")
        query = f"/api/crawls/{crawl_id}/collection/t/{token}/pages"
        exact = (await h.client.get(query, params={"url": "https://d.test/", "pageSize": "25"})).json()
        prefix = (await h.client.get(query, params={"search": "https://d.te"})).json()
        none = (await h.client.get(query, params={"url": "https://d.test/other"})).json()
        forged_query = await h.client.get(f"/api/crawls/{crawl_id}/collection/t/x{token}/pages?url=https://d.test/")
        bad = await h.client.get(query)
        with psycopg.connect(db) as conn:  # an expired ticket opens nothing
            conn.execute("UPDATE collection_tickets SET expires_at = now() - interval '1 s'")
        expired = await h.client.get(path)
    assert with_ticket.status_code == 200, with_ticket.text
    player = with_ticket.json()
    assert [m["archiveId"] for m in player["resources"]] == [archive_id]
    # the player's form: pages looked up by URL (ticket in the path: the player appends its query)
    assert player["pagesQueryUrl"] == f"http://ledger.test/api/crawls/{crawl_id}/collection/t/{token}/pages"
    assert [(p["url"], p["filename"], p["isSeed"]) for p in player["initialPages"]] == [
        ("https://d.test/", f"{archive_id}.wacz", True)] and player["totalPages"] == 1
    assert (elsewhere.status_code, forged.status_code, expired.status_code) == (404, 404, 404)
    assert [(i["url"], i["filename"]) for i in exact["items"]] == [("https://d.test/", f"{archive_id}.wacz")]
    assert exact["total"] == 1 and prefix["items"] == exact["items"] and none == {"items": [], "total": 0}
    assert forged_query.status_code == 404 and bad.status_code == 400 and "url" in bad.json()["error"]


async def test_a_session_outlives_the_signed_urls(migrated_db_url, ledger_fga, fake_webhook, s3_server):
    """A replay session longer than the URLs' life: the URL a member's path redirected to stops
    working at its expiry (S3 answers 403), and reading the same path again — the collection not
    asked again — redirects to a freshly signed URL that works. Through a ticket as the player reads."""
    settings = ledger_settings(migrated_db_url, ledger_fga, fake_webhook.url, s3_bucket=s3_server.bucket,
                               collection_url_expiry_s=2)
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, ["https://f.test/"])
        _, data = capture(settings.database_url, s3_server, ledger_fga, crawl_id, "https://f.test/")
        ticket = (await h.client.post(f"/api/crawls/{crawl_id}/collection/ticket", headers=WHO)).json()["path"]
        [member] = (await h.client.get(ticket)).json()["resources"]
        assert member["path"].startswith(f"/api/crawls/{crawl_id}/collection/t/") and "/members/" in member["path"]
        first = (await h.client.get(member["path"])).headers["location"]  # no identity header: the ticket
        assert httpx.get(first).content == data
        time.sleep(3.1)  # real time: past the 2 s signature (whole seconds in X-Amz-Date)
        stale = httpx.get(first)
        again = await h.client.get(member["path"])
        head = await h.client.head(member["path"])
    assert stale.status_code == 403 and b"expired" in stale.content
    assert again.status_code == 302 and again.headers["location"] != first
    assert httpx.get(again.headers["location"]).content == data
    assert head.status_code == 302


async def test_what_is_in_each_page_and_the_crawls_total_bytes(settings, s3_server, ledger_fga):
    """Issue 25 item 5: the pages list says each page's title, HTTP status, content type, bytes
    and (with a screenshot) a thumbnail; the crawl its total bytes; the archives list size and
    title. Unknown stays null: a page without an archive, a WACZ whose pages.jsonl has no title."""
    import tempfile
    from pathlib import Path

    from tests.devstack.test_replay_crawl import chain_html, page_wacz

    db = settings.database_url
    seeds = ["http://facts.test/", "http://facts.test/untitled", "http://facts.test/failed"]
    png = b"\x89PNG\r\n\x1a\n-a-thumbnail"
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds)
        with tempfile.TemporaryDirectory() as tmp:
            titled = page_wacz(seeds[0], chain_html("Facts", "x.html"), Path(tmp))
        titled_id, _ = capture(db, s3_server, ledger_fga, crawl_id, seeds[0])
        untitled_id, untitled = capture(db, s3_server, ledger_fga, crawl_id, seeds[1])  # helpers' WACZ: title "x"
        set_state(db, crawl_id, seeds[2], "failed", "http_error: HTTP 500")
        with psycopg.connect(db) as conn:  # the first page: a real chain WACZ, a manifest naming its screenshot
            key, task = conn.execute("SELECT object_key, task_id FROM archives WHERE id = %s", (titled_id,)).fetchone()
            s3_server.client().put_object(Bucket=s3_server.bucket, Key=key, Body=titled)
            s3_server.client().put_object(Bucket=s3_server.bucket, Key=f"{task}.png", Body=png)
            s3_server.client().put_object(Bucket=s3_server.bucket, Key=f"{task}.result.json", Body=json.dumps(
                {"artifacts": {"png": f"s3://{s3_server.bucket}/{task}.png"}}).encode())
            conn.execute("INSERT INTO capture_submissions (task_id, org_id, manifest_key) VALUES (%s, 'acme', %s)",
                         (task, f"{task}.result.json"))
        before = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()
        pages = (await h.client.get(f"/api/crawls/{crawl_id}/pages", headers=WHO)).json()["pages"]
        after = (await h.client.get(f"/api/crawls/{crawl_id}", headers=WHO)).json()
        archives = (await h.client.get(f"/api/archives?crawl={crawl_id}", headers=WHO)).json()["archives"]
    first, second, failed = pages
    assert (first["title"], first["httpStatus"], first["contentType"], first["bytes"]) == \
        ("http://facts.test/", 200, "text/html", len(titled))  # page_wacz titles its page with its URL
    assert httpx.get(first["thumbnailUrl"]).content == png
    assert second["title"] == "x" and second["bytes"] == len(untitled) and second["thumbnailUrl"] is None
    assert {k: failed[k] for k in ("title", "httpStatus", "contentType", "bytes", "thumbnailUrl")} == dict.fromkeys(
        ("title", "httpStatus", "contentType", "bytes", "thumbnailUrl"))
    assert (before["totalBytes"], before["bytesUnknown"]) == (0, 2)  # not measured yet: said, not guessed
    assert (after["totalBytes"], after["bytesUnknown"]) == (len(titled) + len(untitled), 0)
    assert {a["id"]: (a["bytes"], a["title"]) for a in archives} == {
        titled_id: (len(titled), "http://facts.test/"), untitled_id: (len(untitled), "x")}


async def test_one_answer_measures_a_bounded_number_and_the_rest_follow(settings, s3_server, ledger_fga, monkeypatch):
    """A crawl of many unmeasured archives does not hold its first answer: a bounded number is
    measured within it (here 1), the others in the background, said as unknown until then."""
    from ledger.crawl import collection as collection_module

    monkeypatch.setattr(collection_module, "MEASURE_INLINE", 1)
    db = settings.database_url
    seeds = [f"https://g.test/{i}" for i in range(3)]
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, seeds)
        for url in seeds:
            capture(db, s3_server, ledger_fga, crawl_id, url)
        first = (await h.client.get(f"/api/crawls/{crawl_id}/collection", headers=WHO)).json()
        deadline = time.monotonic() + 30
        while True:
            later = (await h.client.get(f"/api/crawls/{crawl_id}/collection", headers=WHO)).json()
            if all(m["hash"] for m in later["resources"]) or time.monotonic() > deadline:
                break
            await anyio.sleep(0.2)
    assert [m["hash"] is not None for m in first["resources"]] == [True, False, False]
    assert [m["bytes"] is None for m in first["resources"]] == [False, True, True]
    assert all(m["hash"] and m["bytes"] for m in later["resources"])
