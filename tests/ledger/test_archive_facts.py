"""What an archive holds, known from admission (issue 25 item 5, decision 341): admission (the
real check over the real S3 stand-in, real Postgres) keeps each WACZ's size, title and its main
document's HTTP status and content type; the archives list says them before any collection or
pages list measured the archive; an archive admitted before (no row) is read the first time a list
shows it, once; a page stored as a revisit shows its original's content type and a ``revisit``
marker; only what the archive does not hold is unknown."""

from __future__ import annotations

import uuid

import psycopg
import pytest

from waggle_capture.revisits import payload_digest
from tests.archive.helpers import wacz_bytes
from tests.fixtures.ledger import ledger_settings, open_ledger
from tests.ledger.test_host_leases import WHO, start
from tests.ledger.test_revisit_digests import PAGE, admit, wacz
from tests.fixtures.s3_store import store_of

pytestmark = pytest.mark.anyio


@pytest.fixture
def settings(migrated_db_url, ledger_fga, fake_webhook, s3_server):
    return ledger_settings(migrated_db_url, ledger_fga, fake_webhook.url, s3_bucket=s3_server.bucket)




def share(fga, archive_id: str) -> None:
    fga.write(writes=[{"user": "organization:acme#member", "relation": "viewer", "object": f"archive:{archive_id}"}])


def page_of(db: str, crawl_id: str, url: str, archive_id: str) -> None:
    """The crawl's page ``url`` captured as ``archive_id`` (its task id)."""
    with psycopg.connect(db) as conn:
        conn.execute("UPDATE crawl_pages SET state = 'captured', task_id = (SELECT task_id::text FROM archives"
                     " WHERE id = %s) WHERE crawl_id = %s AND url = %s", (archive_id, crawl_id, url))


def facts_row(db: str, archive_id: str) -> dict | None:
    with psycopg.connect(db) as conn:
        cur = conn.execute("SELECT wacz_bytes, title, http_status, content_type, revisit, original_archive_id, read_at"
                           " FROM archive_facts WHERE archive_id = %s", (archive_id,))
        row = cur.fetchone()
        return None if row is None else dict(zip([c.name for c in cur.description], row))


async def test_admission_keeps_size_title_status_and_type_and_a_revisit_shows_its_originals_type(
        settings, s3_server, ledger_fga):
    db = settings.database_url
    url = "https://facts.test/a"
    first_wacz = wacz(url, PAGE)
    held = {payload_digest(PAGE): {"uri": url, "date": "2026-11-30T10:00:00Z"}}
    revisit_wacz = wacz(url, PAGE, held)
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        first = await start(h, [url], 0)
        original = await admit(h, s3_server, first, "acme", first_wacz)
        again = await start(h, [url], 0)
        revisit = await admit(h, s3_server, again, "acme", revisit_wacz)
        for crawl_id, aid in ((first, original), (again, revisit)):
            share(ledger_fga, aid)
            page_of(db, crawl_id, url, aid)
        archives = (await h.client.get("/api/archives", headers=WHO)).json()["archives"]
        with psycopg.connect(db) as conn:  # nothing measured by a collection or pages list yet
            assert conn.execute("SELECT count(*) FROM archive_files").fetchone()[0] == 0
        first_pages = (await h.client.get(f"/api/crawls/{first}/pages", headers=WHO)).json()["pages"]
        again_pages = (await h.client.get(f"/api/crawls/{again}/pages", headers=WHO)).json()["pages"]
        members = (await h.client.get(f"/api/crawls/{again}/collection", headers=WHO)).json()["resources"]
    kept = facts_row(db, original)
    assert (kept["wacz_bytes"], kept["title"], kept["http_status"], kept["content_type"], kept["revisit"]) == \
        (len(first_wacz), "x", 200, "text/html", False)
    stored = facts_row(db, revisit)
    assert (stored["wacz_bytes"], stored["http_status"], stored["content_type"], stored["revisit"]) == \
        (len(revisit_wacz), 200, None, True)  # the revisit line's mime is warc/revisit: not the page's type
    assert str(stored["original_archive_id"]) == original
    assert {a["id"]: (a["bytes"], a["title"]) for a in archives} == {
        original: (len(first_wacz), "x"), revisit: (len(revisit_wacz), "x")}
    [p1], [p2] = first_pages, again_pages
    assert (p1["contentType"], p1["revisit"], p1["httpStatus"], p1["title"]) == ("text/html", False, 200, "x")
    assert (p2["contentType"], p2["revisit"], p2["httpStatus"]) == ("text/html", True, 200)  # the original's type
    # the recrawl's collection: the revisit member and the original it refers to, both text/html
    assert {m["archiveId"]: m["contentType"] for m in members} == {revisit: "text/html", original: "text/html"}


async def test_an_archive_admitted_before_is_read_once_and_a_missing_object_stays_unknown(
        settings, s3_server, ledger_fga):
    """Rows older than migration 350 (inserted here without facts) get theirs the first time the
    archives list shows them; the second list reads nothing; an object gone from S3 is unknown."""
    db = settings.database_url
    async with open_ledger(settings, s3=store_of(s3_server)) as h:
        crawl_id = await start(h, ["https://old.test/"], 0)
        data = wacz_bytes("https://old.test/")  # the helpers' WACZ: pages.jsonl title "x"
        ids = []
        with psycopg.connect(db) as conn:
            for name, body in (("kept", data), ("gone", None)):
                key = f"old-{uuid.uuid4()}-{name}.wacz"
                if body is not None:
                    s3_server.client().put_object(Bucket=s3_server.bucket, Key=key, Body=body)
                ids.append(str(conn.execute(
                    "INSERT INTO archives (task_id, correlation_id, bucket, object_key, source_url, captured_at,"
                    " wacz_complete) VALUES (%s, %s, %s, %s, %s, now(), true) RETURNING id",
                    (str(uuid.uuid4()), crawl_id, s3_server.bucket, key, "https://old.test/")).fetchone()[0]))
        for aid in ids:
            share(ledger_fga, aid)
        kept, gone = ids
        assert facts_row(db, kept) is None
        listed = {a["id"]: a for a in (await h.client.get("/api/archives", headers=WHO)).json()["archives"]}
        read_at = facts_row(db, kept)["read_at"]
        again = {a["id"]: a for a in (await h.client.get("/api/archives", headers=WHO)).json()["archives"]}
    assert (listed[kept]["bytes"], listed[kept]["title"]) == (len(data), "x")
    assert (listed[gone]["bytes"], listed[gone]["title"]) == (None, None)  # truly unknown: no object
    assert facts_row(db, gone)["wacz_bytes"] is None
    assert facts_row(db, kept)["read_at"] == read_at  # read once
    assert (again[kept]["bytes"], again[kept]["title"]) == (len(data), "x")
